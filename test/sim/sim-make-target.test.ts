/**
 * `aerie-sim make-target <dir>`: the simulator target's weights, deterministic, written once,
 * and read by the self-check's own loader (py/aerie_hs/selfcheck.py load_target).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PY, VENV_PY, run } from '../support/sim-capture.js';
import { BIN, MODEL, tempDir } from '../support/sim-sglang.js';
import { removeWorkdir } from '../support/workdir.js';

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await removeWorkdir(d);
});

async function target(config?: object): Promise<string> {
  const d = await tempDir('aerie-make-target-');
  dirs.push(d);
  if (config) await fs.writeFile(path.join(d, 'config.json'), JSON.stringify(config));
  else await fs.copyFile(path.join(MODEL, 'config.json'), path.join(d, 'config.json'));
  return d;
}

const sha = async (f: string) =>
  createHash('sha256')
    .update(await fs.readFile(f))
    .digest('hex');
const make = (d: string) => run(process.execPath, [BIN, 'make-target', d]);

describe('aerie-sim make-target', () => {
  it('writes the same lm_head and final norm every time, once, and the self-check loads them', async () => {
    const [a, b] = [await target(), await target()];
    const ra = await make(a);
    expect(ra.code).toBe(0);
    expect(ra.stdout).toContain('wrote');
    await make(b);
    const file = path.join(a, 'model.safetensors');
    expect(await sha(file)).toBe(await sha(path.join(b, 'model.safetensors')));
    expect((await fs.readdir(a)).sort()).toEqual(['config.json', 'model.safetensors']);
    const mtime = (await fs.stat(file)).mtimeMs;
    const again = await make(a);
    expect(again.stdout).toContain('up to date');
    expect((await fs.stat(file)).mtimeMs).toBe(mtime);
    const py =
      'import sys, json; from aerie_hs.selfcheck import load_target; t = load_target(sys.argv[1]); ' +
      'print(json.dumps({"head": list(t["head"].shape), "norm": list(t["norm"].shape), "name": t["norm_name"], "finite": bool(abs(t["head"]).max() < 1)}))';
    const r = await run(VENV_PY, ['-c', py, a], { env: { PYTHONPATH: PY } });
    expect(JSON.parse(r.stdout.trim().split('\n').pop()!)).toEqual({
      head: [32000, 512],
      norm: [512],
      name: 'model.norm.weight',
      finite: true,
    });
  }, 60_000);

  it('rewrites a file whose header is not the one its config asks for', async () => {
    const d = await target({ hidden_size: 8, vocab_size: 16 });
    await fs.writeFile(path.join(d, 'model.safetensors'), 'truncated');
    const r = await make(d);
    expect(r.stdout).toContain('wrote');
    expect((await fs.stat(path.join(d, 'model.safetensors'))).size).toBeGreaterThan(16 * 8 * 2);
  }, 30_000);

  it('refuses a config without integer sizes (exit 2, naming the keys)', async () => {
    const d = await target({ hidden_size: 'big' });
    const r = await make(d);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('vocab_size and hidden_size');
  }, 30_000);
});
