/**
 * aerie-sim as SGLang 0.5.23 with aerie's capture plugin: the demo's chain on its output, with
 * aerie's real host-side Python (tokens.py -> prefill by ids -> the converter and the
 * self-check), and the plugin's own start-up refusals.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CAPTURE_ARGS,
  type IdsRow,
  PROMPTS,
  captureEnv,
  convert,
  jsonl,
  makeTarget,
  prefill,
  regenerate,
  selfcheck,
  stagePlugin,
  tokens,
} from '../support/sim-capture.js';
import { Sim, runToExit, tempDir } from '../support/sim-sglang.js';
import { removeWorkdir } from '../support/workdir.js';

async function dumpMeta(file: string): Promise<Record<string, string>> {
  const b = await fs.readFile(file);
  return JSON.parse(b.subarray(8, 8 + Number(b.readBigUInt64LE(0))).toString('utf8')).__metadata__;
}

let target: string;
let plugin: string;
let work: string;
let rows: IdsRow[];

beforeAll(async () => {
  [target, plugin, work] = await Promise.all([makeTarget(), stagePlugin(), tempDir('aerie-capture-')]);
});

afterAll(async () => {
  for (const d of [target, plugin, work]) if (d) await removeWorkdir(d);
});

async function startCapture(name: string, extraEnv: Record<string, string> = {}): Promise<{ sim: Sim; dumps: string }> {
  const dumps = path.join(work, name);
  await fs.mkdir(dumps);
  const sim = await Sim.start(['--model-path', target, ...CAPTURE_ARGS], captureEnv(plugin, dumps, extraEnv));
  await sim.ready();
  return { sim, dumps };
}

async function writeInputs(dir: string, ids: IdsRow[], greedy: { id: string; greedy_next: number }[]) {
  const idsFile = path.join(dir, 'ids.jsonl');
  const greedyFile = path.join(dir, 'greedy.jsonl');
  await fs.writeFile(idsFile, jsonl(ids));
  await fs.writeFile(greedyFile, jsonl(greedy));
  return { idsFile, greedyFile };
}

describe('the demo chain on the simulator: regenerate, tokenize on the host, capture, convert, self-check', () => {
  it('passes the real self-check (teacher agreement well above 0.5, greedy exact) and converts every dump', async () => {
    const { sim, dumps } = await startCapture('chain');
    try {
      expect(sim.stderr).toContain('Executed general plugin: aerie_hs_capture');
      const convs = await regenerate(sim);
      rows = await tokens(target, convs);
      expect(rows.map((r) => r.id)).toEqual(PROMPTS.map((p) => p.id));
      const greedy = await prefill(sim, rows);
      const names = (await fs.readdir(dumps)).sort();
      for (const r of rows) expect(names).toContain(`${r.id}.safetensors`);
      expect(names.some((n) => n.endsWith('.tmp'))).toBe(false);
      const meta = await dumpMeta(path.join(dumps, `${rows[0].id}.safetensors`));
      expect(meta).toEqual({
        format: 'aerie-hs/1',
        rid: rows[0].id,
        tokens: String(rows[0].input_ids.length),
        aux_layers: '[2, 8, 14]',
        tp_rank: '0',
        input_ids_sha256: createHash('sha256')
          .update(Buffer.from(new BigInt64Array(rows[0].input_ids.map(BigInt)).buffer))
          .digest('hex'),
      });
      const { idsFile, greedyFile } = await writeInputs(work, rows, greedy);
      const { code, verdict } = await selfcheck(target, dumps, idsFile, greedyFile);
      expect(verdict.messages).toEqual([]);
      expect(code).toBe(0);
      expect(verdict.checks.teacher.figures!.agreement_next).toBeGreaterThan(0.7);
      expect(verdict.checks.greedy.figures).toMatchObject({ checked: rows.length, exact: rows.length });
      const conv = await convert(dumps, idsFile, path.join(work, 'out'));
      expect(conv.code).toBe(0);
      expect(conv.lines.filter((l) => l.startsWith('OK '))).toHaveLength(rows.length);
      expect(conv.lines.at(-1)).toBe(`END written=${rows.length} skipped=0 missing=0 rejected=0 failed=0`);
    } finally {
      await sim.stop();
    }
  }, 120_000);

  it("captures every prefill but SGLang's health probes: the warmup leaves a dump named by the rid SGLang makes", async () => {
    const { sim, dumps } = await startCapture('probes');
    try {
      const before = await fs.readdir(dumps);
      expect(before.filter((n) => /^[0-9a-f]{32}\.safetensors$/.test(n))).toHaveLength(1); // the warmup's
      expect(await sim.status('/health')).toBe(200);
      const after = await fs.readdir(dumps);
      expect(after.filter((n) => n.startsWith('HEALTH_CHECK_'))).toEqual([]);
      const odd = await sim.json('/generate', {
        input_ids: [0, 5, 6],
        rid: 'a/b',
        sampling_params: { max_new_tokens: 1, temperature: 0 },
      });
      expect(odd.status).toBe(200);
      expect(sim.stderr).toContain('capture failed for unnameable rid "a/b"');
      const files = await fs.readdir(dumps);
      expect(files.filter((n) => !/^[0-9a-f]{32}\.safetensors$/.test(n))).toEqual([]);
    } finally {
      await sim.stop();
    }
  }, 60_000);
});

describe('AERIE_SIM_HS_FAULT: each broken capture fails the check that names it', () => {
  async function faulted(fault: string, every?: number) {
    const env: Record<string, string> = { AERIE_SIM_HS_FAULT: fault };
    if (every) env.AERIE_SIM_HS_FAULT_EVERY = String(every);
    const { sim, dumps } = await startCapture(`fault-${fault}-${every ?? 1}`, env);
    const some = rows.slice(0, 2);
    try {
      const greedy = await prefill(sim, some);
      const dir = path.join(dumps, '..', `in-${fault}-${every ?? 1}`);
      await fs.mkdir(dir);
      const files = await writeInputs(dir, some, greedy);
      return { dumps, some, ...files, out: path.join(dir, 'out') };
    } finally {
      await sim.stop();
    }
  }

  it('short-by-one: the converter and the tokens check say the dump is a token short', async () => {
    const f = await faulted('short-by-one');
    const conv = await convert(f.dumps, f.idsFile, f.out);
    expect(conv.lines.filter((l) => l.startsWith('FAIL ')).every((l) => l.includes('short by one token'))).toBe(true);
    expect(conv.lines.at(-1)).toContain(`failed=${f.some.length}`);
    const { code, verdict } = await selfcheck(target, f.dumps, f.idsFile, f.greedyFile);
    expect(code).toBe(1);
    expect(verdict.checks.tokens.ok).toBe(false);
    expect(verdict.checks.tokens.messages[0]).toMatch(/has T=\d+ rows but input_ids has \d+ tokens/);
  }, 60_000);

  it("tp-rank-1: the converter refuses a second rank's dump", async () => {
    const f = await faulted('tp-rank-1');
    const conv = await convert(f.dumps, f.idsFile, f.out);
    expect(conv.lines.filter((l) => l.startsWith('FAIL '))).toHaveLength(f.some.length);
    expect(conv.stdout).toContain('written by tp_rank 1');
  }, 60_000);

  it('no-final: no hidden_state tensor, named by the converter and by the self-check', async () => {
    const f = await faulted('no-final');
    const conv = await convert(f.dumps, f.idsFile, f.out);
    expect(conv.stdout).toContain('no hidden_state tensor');
    const { code, verdict } = await selfcheck(target, f.dumps, f.idsFile, f.greedyFile);
    expect(code).toBe(1);
    expect(verdict.checks.tokens.messages[0]).toContain('the dump has no hidden_state');
  }, 60_000);

  it('error: <rid>.error.json in aerie-hs/1 instead of a dump; the converter reports it missing', async () => {
    const f = await faulted('error');
    for (const r of f.some) {
      const err = JSON.parse(await fs.readFile(path.join(f.dumps, `${r.id}.error.json`), 'utf8'));
      expect(err).toMatchObject({ format: 'aerie-hs/1', rid: r.id });
      expect(err.error).toContain('--disable-cuda-graph');
      await expect(fs.stat(path.join(f.dumps, `${r.id}.safetensors`))).rejects.toThrow();
    }
    const conv = await convert(f.dumps, f.idsFile, f.out);
    expect(conv.lines.filter((l) => l.startsWith('MISSING '))).toHaveLength(f.some.length);
  }, 60_000);

  it('shifted: states one token late fail the teacher alignment and the greedy check', async () => {
    const f = await faulted('shifted');
    const { code, verdict } = await selfcheck(target, f.dumps, f.idsFile, f.greedyFile);
    expect(code).toBe(1);
    expect(verdict.checks.teacher.messages.join('\n')).toContain('the token at its own position');
    expect(verdict.checks.greedy.ok).toBe(false);
    const conv = await convert(f.dumps, f.idsFile, f.out); // structurally sound: only the self-check can tell
    expect(conv.lines.at(-1)).toContain(`written=${f.some.length}`);
  }, 60_000);

  it('AERIE_SIM_HS_FAULT_EVERY=2 spares the first request and breaks the second', async () => {
    const f = await faulted('no-final', 2);
    const conv = await convert(f.dumps, f.idsFile, f.out);
    expect(conv.lines[0]).toMatch(new RegExp(`^OK 0 ${f.some[0].id} `));
    expect(conv.lines[1]).toMatch(new RegExp(`^FAIL ${f.some[1].id}\t.*no hidden_state tensor`));
  }, 60_000);
});

describe("the plugin's own start-up decides the launch", () => {
  it('a launch without --disable-radix-cache dies with the fix in the log', async () => {
    const dumps = await tempDir('aerie-capture-refuse-');
    try {
      const args = CAPTURE_ARGS.filter((a) => a !== '--disable-radix-cache');
      const sim = await runToExit(['--model-path', target, ...args], captureEnv(plugin, dumps));
      expect(sim.exitCode).toBe(1);
      expect(sim.stderr).toContain('add --disable-radix-cache');
      expect(sim.stderr).toContain('RuntimeError: Rank 0 scheduler died during initialization (exit code: 1)');
      expect(sim.stderr).not.toContain('Init torch distributed begin');
    } finally {
      await removeWorkdir(dumps);
    }
  }, 30_000);

  it("a missing AERIE_HS_DUMP_DIR ends the scheduler with the plugin's SystemExit", async () => {
    const missing = path.join(work, 'no-such-dir');
    const sim = await runToExit(['--model-path', target, ...CAPTURE_ARGS], captureEnv(plugin, missing));
    expect(sim.exitCode).toBe(1);
    expect(sim.stderr).toContain(`AERIE_HS_DUMP_DIR=${missing} is not a directory`);
  }, 30_000);

  it('AERIE_HS_AUX_LAYERS that is not JSON stops the scheduler (an ordinary exception would be logged and ignored, leaving a server without capture)', async () => {
    const dumps = await tempDir('aerie-capture-badenv-');
    try {
      const sim = await runToExit(
        ['--model-path', target, ...CAPTURE_ARGS],
        captureEnv(plugin, dumps, { AERIE_HS_AUX_LAYERS: '1,7,13' }),
      );
      expect(sim.exitCode).toBe(1);
      expect(sim.stderr).toContain('AERIE_HS_AUX_LAYERS is not JSON');
      expect(sim.stderr).toContain('RuntimeError: Rank 0 scheduler died during initialization (exit code: 1)');
      expect(await fs.readdir(dumps)).toEqual([]);
    } finally {
      await removeWorkdir(dumps);
    }
  }, 30_000);

  it("without --return-aux-hidden-state-layer-ids the dumps name the model's EAGLE3 default capture layers [2, L/2, L-3]", async () => {
    const dumps = await tempDir('aerie-capture-default-');
    try {
      const args = ['--enable-return-aux-hidden-states', '--speculative-algorithm', 'EAGLE3', '--disable-radix-cache'];
      const sim = await Sim.start(['--model-path', target, ...args], captureEnv(plugin, dumps));
      try {
        await sim.ready();
        await prefill(sim, [{ id: 'd1', input_ids: [0, 5, 6], loss_mask: [0, 0, 1] }]);
      } finally {
        await sim.stop();
      }
      expect((await dumpMeta(path.join(dumps, 'd1.safetensors'))).aux_layers).toBe('[2, 8, 13]');
    } finally {
      await removeWorkdir(dumps);
    }
  }, 30_000);

  it('without the dist-info on PYTHONPATH, or without AERIE_HS_DUMP_DIR, the server serves and writes nothing', async () => {
    const dumps = await tempDir('aerie-capture-inert-');
    try {
      for (const [env, says] of [
        [{ PYTHONPATH: '', AERIE_HS_DUMP_DIR: dumps }, null],
        [{ PYTHONPATH: plugin }, 'Executed general plugin: aerie_hs_capture'],
      ] as const) {
        const sim = await Sim.start(['--model-path', target, ...CAPTURE_ARGS], env);
        try {
          await sim.ready();
          const r = await sim.json('/generate', {
            input_ids: [0, 5, 6],
            rid: 'x1',
            sampling_params: { max_new_tokens: 1, temperature: 0 },
          });
          expect(r.status).toBe(200);
        } finally {
          await sim.stop();
        }
        // plugin() returns at once without AERIE_HS_DUMP_DIR; SGLang still logs that it ran it
        if (says) expect(sim.stderr).toContain(says);
        else expect(sim.stderr).not.toContain('Available plugins');
      }
      expect(await fs.readdir(dumps)).toEqual([]);
    } finally {
      await removeWorkdir(dumps);
    }
  }, 60_000);
});
