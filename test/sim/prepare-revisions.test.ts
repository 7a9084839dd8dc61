/**
 * The simulated prepare_hidden_states.py per SpecForge revision (AERIE_SIM_SPECFORGE_REVISION):
 * exactly that revision's flags (argparse's exit 2 otherwise), --draft-model-config read as
 * a6b6b023 reads it, the vocab mapping where the real script writes it, rows shuffled before
 * they are numbered, and the last partial batch dropped.
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { recordTokens, runPrepare, shuffledRows } from '../../sim/specforge/prepare.js';
import { pythonOut } from '../support/python.js';
import { useWorkdir } from '../support/workdir.js';

const ROOT = resolve(import.meta.dirname, '../..');
const TARGET = join(ROOT, 'examples/models/sim-llama-8b');
const DRAFT = join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json');

let dir: string;
let data: string;
let rows: unknown[];

const tmp = useWorkdir('aerie-prep-', { each: true });
beforeEach(async () => {
  dir = tmp.path;
  // Rows of distinct lengths, so a file's token count tells which row it holds.
  rows = Array.from({ length: 10 }, (_, i) => ({
    conversations: [
      { role: 'user', content: 'w '.repeat(i + 1) },
      { role: 'assistant', content: 'ok' },
    ],
  }));
  data = join(dir, 'train.jsonl');
  await writeFile(data, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
});

async function prepare(revision: string, extra: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io = {
    out: (t: string) => void (out += t),
    err: (t: string) => void (err += t),
    env: { AERIE_SIM_TIME_SCALE: '0', AERIE_SIM_SPECFORGE_REVISION: revision },
  };
  const code = await runPrepare(
    [
      '--target-model-path',
      TARGET,
      '--data-path',
      data,
      '--output-path',
      join(dir, 'out'),
      '--batch-size',
      '4',
      ...extra,
    ],
    io,
  );
  return { code, out, err };
}

/** Tokens of each data_i.ckpt, by i, read with Python's zipfile (input_ids is int64: 8 bytes a token). */
function fileTokens(out: string): number[] {
  const script =
    "import sys, zipfile, glob, re\nfor p in sorted(glob.glob(sys.argv[1] + '/rows_*/data_*.ckpt')):\n    z = zipfile.ZipFile(p)\n    n = [i for i in z.namelist() if i.endswith('/data/0')][0]\n    print(re.search(r'data_(\\d+)', p).group(1), z.getinfo(n).file_size // 8)\n";
  const lines = pythonOut(script, [out], { pythonPath: false }).trim().split('\n');
  const byIdx: number[] = [];
  for (const l of lines) {
    const [i, t] = l.split(' ').map(Number);
    byIdx[i!] = t!;
  }
  return byIdx;
}

describe('simulated prepare_hidden_states.py, revision by revision', () => {
  it('v0.2.0 (73e6f808): takes --enable-aux-hidden-states, refuses --draft-model-config and --compress with exit 2', async () => {
    expect((await prepare('v0.2.0', ['--enable-aux-hidden-states'])).code).toBe(0);
    for (const bad of [['--draft-model-config', DRAFT], ['--compress']]) {
      const r = await prepare('v0.2.0', bad);
      expect(r.code).toBe(2);
      expect(r.err).toMatch(
        new RegExp(`prepare_hidden_states.py: error: unrecognized arguments: ${bad.join(' ')}\\n$`),
      );
    }
    expect(existsSync(join(dir, 'out', 'vocab_mapping'))).toBe(false);
  });

  it('v0.2-resume (20e2e3f0): has --compress; cli (a6b6b023): no --enable-aux-hidden-states', async () => {
    expect((await prepare('v0.2-resume', ['--enable-aux-hidden-states', '--compress'])).code).toBe(0);
    expect(existsSync(join(dir, 'out', 'rows_0-2000', 'data_0.ckpt.gz'))).toBe(true);
    const r = await prepare('cli', ['--draft-model-config', DRAFT, '--enable-aux-hidden-states']);
    expect(r.code).toBe(2);
    expect(r.err).toMatch(/unrecognized arguments: --enable-aux-hidden-states/);
    await expect(prepare('v9', [])).rejects.toThrow(/AERIE_SIM_SPECFORGE_REVISION=v9/);
  });

  it('cli: --draft-model-config is needed though argparse lets it default to None, and must be a JSON file', async () => {
    const none = await prepare('cli', []);
    expect(none.code).toBe(1);
    expect(none.err).toMatch(
      /_resolve_draft_vocab_size[\s\S]*TypeError: expected str, bytes or os.PathLike object, not NoneType/,
    );
    const missing = await prepare('cli', ['--draft-model-config', join(dir, 'nope.json')]);
    expect(missing.err).toMatch(/FileNotFoundError: --draft-model-config must point to an existing local JSON file/);
  });

  it('cli: writes <out>/vocab_mapping/vocab_mapping.pt (d2t, t2d), renamed into place, before the states', async () => {
    const r = await prepare('cli', ['--draft-model-config', DRAFT]);
    expect(r.code).toBe(0);
    const mapping = join(dir, 'out', 'vocab_mapping', 'vocab_mapping.pt');
    expect(r.out).toContain(`Vocabulary mapping ready at ${mapping}\n`);
    expect(r.out.indexOf('Vocabulary mapping ready')).toBeLessThan(r.out.indexOf('Generation loop finished'));
    expect(await readdir(join(dir, 'out', 'vocab_mapping'))).toEqual(['vocab_mapping.pt']);
    const pkl = (await readFile(mapping)).toString('latin1');
    expect(pkl).toMatch(/d2t[\s\S]*LongStorage[\s\S]*t2d[\s\S]*BoolStorage/);
  });

  it('numbers rows after a fixed shuffle (data_i is not row i) and drops the last partial batch', async () => {
    const r = await prepare('cli', ['--draft-model-config', DRAFT]);
    expect(r.out).toMatch(/Processed: 8, Skipped: 0/);
    const tokens = fileTokens(join(dir, 'out'));
    expect(tokens.length).toBe(8); // 10 rows, --batch-size 4, drop_last
    const byRow = rows.map((row) => recordTokens(row, 2048).ids.length);
    const order = shuffledRows(10);
    expect(tokens).toEqual(order.slice(0, 8).map((i) => byRow[i]));
    expect(tokens).not.toEqual(byRow.slice(0, 8));
  });
});
