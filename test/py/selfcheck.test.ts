/**
 * py/aerie_hs/selfcheck.py on a hand-made target where every verdict is computable exactly:
 * H=4, V=6, lm_head rows are ±unit vectors, so the argmax of a state 2·e_k (or -2·e_k) is one
 * known token and a post-norm state has rms(h / norm.weight) = 1 exactly. The states are
 * written as the capture writes them (safetensors, BF16) by a writer of this test's own.
 * Runs with a Python that has numpy and no torch where one exists (the numpy-only path).
 */
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { createHash } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { python, pythonSync } from '../support/python.js';
import { useWorkdir } from '../support/workdir.js';

const ROOT = resolve(import.meta.dirname, '../..');

/** A python with numpy: the project's set-up venvs first (not .venv-real, which has torch), then python3. */
function pickPython(): string {
  const venvs = readdirSync(ROOT)
    .filter((d) => d.startsWith('.venv') && d !== '.venv-real')
    .map((d) => join(ROOT, d, 'bin/python'));
  for (const py of [...venvs.filter((p) => existsSync(p)), 'python3']) {
    if (pythonSync(['-c', 'import numpy'], { python: py, pythonPath: false }).code === 0) return py;
  }
  throw new Error('no Python with numpy for the self-check: run `bash scripts/setup.sh --test`');
}

function bf16(xs: number[]): Buffer {
  const f = new Float32Array(xs);
  const u = new Uint32Array(f.buffer);
  const out = Buffer.alloc(2 * xs.length);
  for (let i = 0; i < u.length; i++)
    out.writeUInt16LE(((u[i]! + 0x7fff + ((u[i]! >>> 16) & 1)) >>> 16) & 0xffff, 2 * i);
  return out;
}

type T = { dtype: 'BF16'; shape: number[]; data: Buffer };
async function writeSafetensors(
  path: string,
  tensors: Record<string, T>,
  meta?: Record<string, string>,
): Promise<void> {
  const header: Record<string, unknown> = meta ? { __metadata__: meta } : {};
  let off = 0;
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.data.length] };
    off += t.data.length;
  }
  let json = Buffer.from(JSON.stringify(header));
  json = Buffer.concat([json, Buffer.alloc((8 - (json.length % 8)) % 8, 0x20)]);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  await writeFile(path, Buffer.concat([len, json, ...Object.values(tensors).map((t) => t.data)]));
}

const H = 4;
const V = 6;
// token v is the argmax of the state UNIT[v] (rows of lm_head are these directions)
const UNIT = [
  [1, 0, 0, 0],
  [0, 1, 0, 0],
  [0, 0, 1, 0],
  [0, 0, 0, 1],
  [-1, 0, 0, 0],
  [0, -1, 0, 0],
];
const NORM_W = [2, 1, 0.5, 1];
/** The post-norm state whose argmax is v: norm.weight · x with rms(x) = 1 (x = 2·unit). */
const stateFor = (v: number): number[] => UNIT[v]!.map((u, d) => 2 * u * NORM_W[d]!);
const IDS = [0, 1, 2, 3, 4, 5, 0, 2, 4, 1];
const MASK = [0, 0, 0, 1, 1, 1, 1, 1, 1, 1]; // 7 next-token targets (positions 3..9)
const GREEDY = 3;
const auxRows = (t: number): number[] =>
  [0, 1, 2].flatMap((i) => [0, 1, 2, 3].map((d) => (i + 1) * (((t + d) % 3) - 1 + 0.25)));
const sha = (ids: number[]): string => {
  const b = Buffer.alloc(8 * ids.length);
  ids.forEach((x, i) => b.writeBigInt64LE(BigInt(x), 8 * i));
  return createHash('sha256').update(b).digest('hex');
};

let dir: string;
let py: string;

async function model(name: string, opts: { tied?: boolean } = {}): Promise<string> {
  const d = join(dir, name);
  await mkdir(d, { recursive: true });
  await writeFile(
    join(d, 'config.json'),
    JSON.stringify({ hidden_size: H, vocab_size: V, num_hidden_layers: 4, tie_word_embeddings: !!opts.tied }),
  );
  const head = UNIT.flat();
  const tensors: Record<string, T> = {
    'model.embed_tokens.weight': {
      dtype: 'BF16',
      shape: [V, H],
      data: bf16(opts.tied ? head : head.map((x) => x + 0.5)),
    },
    // under tie_word_embeddings the checkpoint's lm_head (if any) is not what the model uses: make it wrong
    'lm_head.weight': { dtype: 'BF16', shape: [V, H], data: bf16(opts.tied ? head.map((x) => -x) : head) },
    'model.norm.weight': { dtype: 'BF16', shape: [H], data: bf16(NORM_W) },
  };
  await writeSafetensors(join(d, 'model-00001-of-00001.safetensors'), tensors);
  await writeFile(
    join(d, 'model.safetensors.index.json'),
    JSON.stringify({
      metadata: {},
      weight_map: Object.fromEntries(Object.keys(tensors).map((k) => [k, 'model-00001-of-00001.safetensors'])),
    }),
  );
  return d;
}

type Case = {
  ids?: number[];
  mask?: number[];
  greedy?: number | null;
  finals?: number[][];
  aux?: (t: number) => number[];
  dumpT?: number;
  metaIds?: number[];
  samples?: number;
  extra?: Case;
};

async function runCase(name: string, c: Case, modelDir?: string): Promise<{ code: number; out: any }> {
  const d = join(dir, name);
  await mkdir(join(d, 'dumps'), { recursive: true });
  const rows: string[] = [];
  const greedyRows: string[] = [];
  for (const [k, cc] of [c, c.extra].entries()) {
    if (!cc) continue;
    const id = `s${k}`;
    const ids = cc.ids ?? IDS;
    const T = cc.dumpT ?? IDS.length;
    // the true final state at t predicts IDS[t+1]; the last one the greedy token
    const finals =
      cc.finals ?? Array.from({ length: T }, (_, t) => stateFor(t + 1 < IDS.length ? IDS[t + 1]! : GREEDY));
    await writeSafetensors(
      join(d, 'dumps', `${id}.safetensors`),
      {
        aux_hidden_state: {
          dtype: 'BF16',
          shape: [T, 3 * H],
          data: bf16(Array.from({ length: T }, (_, t) => (cc.aux ?? auxRows)(t)).flat()),
        },
        hidden_state: { dtype: 'BF16', shape: [T, H], data: bf16(finals.flat()) },
      },
      {
        format: 'aerie-hs/1',
        rid: id,
        tokens: String(T),
        aux_layers: '[1, 1, 0]',
        tp_rank: '0',
        input_ids_sha256: sha(cc.metaIds ?? IDS),
      },
    );
    rows.push(JSON.stringify({ id, input_ids: ids, loss_mask: cc.mask ?? MASK }));
    if (cc.greedy !== null) greedyRows.push(JSON.stringify({ id, greedy_next: cc.greedy ?? GREEDY }));
  }
  await writeFile(join(d, 'ids.jsonl'), rows.join('\n') + '\n');
  await writeFile(join(d, 'greedy.jsonl'), greedyRows.join('\n') + '\n');
  const args = [
    '-m',
    'aerie_hs.selfcheck',
    '--model',
    modelDir ?? join(dir, 'target'),
    '--dumps',
    join(d, 'dumps'),
    '--ids',
    join(d, 'ids.jsonl'),
    '--greedy',
    join(d, 'greedy.jsonl'),
  ];
  // the reference forward needs a real transformers model; this target is only a head and a norm
  args.push('--reference', 'off');
  if (c.samples) args.push('--samples', String(c.samples));
  const { code, stdout, stderr } = await python(args, { python: py });
  let out: any;
  try {
    out = JSON.parse(stdout);
  } catch {
    out = { raw: stdout, stderr };
  }
  return { code: code ?? -1, out };
}

const tmp = useWorkdir('aerie-selfcheck-');
beforeAll(async () => {
  dir = tmp.path;
  py = pickPython();
  await model('target');
});

describe('selfcheck on a hand-made target', () => {
  it('passes the true states: every next-token target agrees, none repeats, post-norm rms 1, greedy exact', async () => {
    const { code, out } = await runCase('true', {});
    expect(out.messages).toEqual([]);
    expect(code).toBe(0);
    expect(out.ok).toBe(true);
    expect(out.checks.teacher.figures).toMatchObject({
      agreement_next: 1,
      positions: 7,
      distinct_positions: 6,
      distinct_next: 1,
      distinct_same: 0,
      distinct_skip: 0,
    });
    expect(out.checks.final.figures.norm_rms_median).toBeCloseTo(1, 6);
    expect(out.checks.greedy.figures).toEqual({ checked: 1, exact: 1, within_bf16: 0 });
    expect(out.per_sample[0].tokens).toEqual({ T_ids: 10, T_aux: 10, T_final: 10, sha_match: true });
  });

  it('reads the tied embedding, not the checkpoint lm_head, under tie_word_embeddings', async () => {
    const { code, out } = await runCase('tied', {}, await model('tied-target', { tied: true }));
    expect(code).toBe(0);
    expect(out.checks.teacher.figures.agreement_next).toBe(1);
  });

  it('draws the agreement line at 0.5: 4 of 7 targets passes, 3 of 7 fails with the rate', async () => {
    // the states at t = 2 .. 2+wrong-1 predict a token that is none of ids[t], ids[t+1], ids[t+2]
    const finals = (wrong: number) =>
      IDS.map((_, t) => stateFor(t + 1 < IDS.length ? (IDS[t + 1]! + (t >= 2 && t < 2 + wrong ? 3 : 0)) % V : GREEDY));
    const four = await runCase('agree-4of7', { finals: finals(3) });
    expect(four.out.checks.teacher.figures.agreement_next).toBeCloseTo(4 / 7, 12);
    expect(four.code).toBe(0);
    const three = await runCase('agree-3of7', { finals: finals(4) });
    expect(three.out.checks.teacher.figures.agreement_next).toBeCloseTo(3 / 7, 12);
    expect(three.code).toBe(1);
    expect(three.out.checks.teacher.messages.join('\n')).toMatch(
      /predict the next assistant token at rate 0\.429 < 0\.5 over 7 positions/,
    );
  });

  it('fails tokens shifted by one: the states predict each token at its own position, and the digest disagrees', async () => {
    const shifted = [...IDS.slice(1), GREEDY];
    const { code, out } = await runCase('shifted', { ids: shifted, metaIds: IDS, greedy: null });
    expect(code).toBe(1);
    expect(out.checks.teacher.figures).toMatchObject({ agreement_next: 0, distinct_same: 1 });
    expect(out.checks.teacher.messages.join('\n')).toMatch(
      /the token at its own position: the states sit one token later than the ids/,
    );
    expect(out.checks.tokens.messages.join('\n')).toMatch(
      /s0: the dump's input_ids_sha256 is not the sha256 of these input_ids/,
    );
  });

  it('fails tokens shifted the other way as predicting two ahead', async () => {
    const later = [GREEDY, ...IDS.slice(0, -1)];
    const { code, out } = await runCase('shifted-later', { ids: later, metaIds: later, greedy: null });
    expect(code).toBe(1);
    expect(out.checks.teacher.figures).toMatchObject({ agreement_next: 0, distinct_skip: 1 });
    expect(out.checks.teacher.messages.join('\n')).toMatch(/the token two ahead: the states sit one token earlier/);
  });

  it('fails a state from before the final norm (argmax unchanged, rms(h / norm.weight) = 3)', async () => {
    const finals = IDS.map((_, t) => stateFor(t + 1 < IDS.length ? IDS[t + 1]! : GREEDY).map((x) => 3 * x));
    const { code, out } = await runCase('prenorm', { finals });
    expect(code).toBe(1);
    expect(out.checks.teacher.ok).toBe(true);
    expect(out.checks.final.figures.norm_rms_median).toBeCloseTo(3, 6);
    expect(out.checks.final.messages[0]).toMatch(
      /s0: hidden_state is not the final post-norm state: rms\(h \/ norm.weight\) is 3 per token/,
    );
  });

  it("fails a greedy token the last state does not predict, and passes one tied with the argmax within bf16's rounding", async () => {
    const bad = await runCase('greedy-bad', { greedy: 1 });
    expect(bad.code).toBe(1);
    expect(bad.out.checks.greedy.messages[0]).toMatch(
      /s0: at the last position the states predict token 3 but the server's greedy next token is 1 \(logit gap 2 > bf16 rounding bound 0\.0078/,
    );
    const tie = IDS.map((_, t) => (t + 1 < IDS.length ? stateFor(IDS[t + 1]!) : [0, Math.SQRT2, 0, Math.SQRT2]));
    const tied = await runCase('greedy-tie', { finals: tie, greedy: 3 });
    expect(tied.out.checks.greedy.figures).toEqual({ checked: 1, exact: 0, within_bf16: 1 });
    expect(tied.code).toBe(0);
  });

  it('fails a zeroed aux block, a block captured twice, a NaN, and the final state stored as an aux layer', async () => {
    const zero = await runCase('aux-zero', { aux: (t) => auxRows(t).map((x, i) => (i >= H && i < 2 * H ? 0 : x)) });
    expect(zero.code).toBe(1);
    expect(zero.out.checks.aux.messages).toEqual(['s0: aux block 1 is all zeros: that layer was never captured']);
    const twice = await runCase('aux-twice', {
      aux: (t) => {
        const r = auxRows(t);
        return [...r.slice(0, H), ...r.slice(H, 2 * H), ...r.slice(0, H)];
      },
    });
    expect(twice.out.checks.aux.messages[0]).toMatch(
      /s0: aux blocks 0 and 2 are the same values \(relative difference 0\): one layer captured twice/,
    );
    const nan = await runCase('aux-nan', { aux: (t) => auxRows(t).map((x, i) => (t === 4 && i === 2 ? NaN : x)) });
    expect(nan.out.checks.aux.messages).toEqual(['s0: aux block 0 has 1 NaN/Inf values']);
    const fin = await runCase('aux-final', {
      aux: (t) => [...auxRows(t).slice(0, 2 * H), ...stateFor(t + 1 < IDS.length ? IDS[t + 1]! : GREEDY)],
    });
    expect(fin.out.checks.aux.messages[0]).toMatch(/s0: aux block 2 equals hidden_state/);
    expect(zero.out.checks.teacher.ok && twice.out.checks.teacher.ok).toBe(true);
  });

  it('fails a dump one token short, naming both lengths', async () => {
    const { code, out } = await runCase('short', { dumpT: 9 });
    expect(code).toBe(1);
    expect(out.checks.tokens.messages).toContain('s0: aux_hidden_state has T=9 rows but input_ids has 10 tokens');
    expect(out.checks.tokens.messages).toContain("s0: the dump's metadata says tokens=9, input_ids has 10");
  });

  it('--samples N checks only the first N samples', async () => {
    const c: Case = { extra: { aux: (t) => auxRows(t).map((x, i) => (i < H ? 0 : x)) } };
    expect((await runCase('samples-all', c)).out.messages).toEqual([
      's1: aux block 0 is all zeros: that layer was never captured',
    ]);
    const first = await runCase('samples-1', { ...c, samples: 1 });
    expect(first.code).toBe(0);
    expect(first.out.samples).toBe(1);
  });

  it('exits 2 naming the file when the target has no lm_head', async () => {
    const d = join(dir, 'headless');
    await mkdir(d, { recursive: true });
    await writeFile(join(d, 'config.json'), JSON.stringify({ hidden_size: H, vocab_size: V }));
    await writeSafetensors(join(d, 'model.safetensors'), {
      'model.norm.weight': { dtype: 'BF16', shape: [H], data: bf16(NORM_W) },
    });
    const { code, out } = await runCase('headless', {}, d);
    expect(code).toBe(2);
    expect(out.error).toMatch(/--model .*headless: the weight map has no lm_head\.weight/);
  });
});
