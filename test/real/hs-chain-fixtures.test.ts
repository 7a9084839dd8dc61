/**
 * aerie's extraction chain on real tensors (test/fixtures/real/aerie-hs-chain, PROVENANCE.md
 * there): the tiny Llama's own greedy chats, tokens from py/aerie_hs/tokens.py (checked against
 * SpecForge's preprocessing), states from py/aerie_hs/capture.py through CaptureBuffer, the
 * self-check on three cases, py/aerie_hs/ckpt.py's files, and real SpecForge a6b6b023 training on
 * them on the lent H200: killed -9, resumed, exported. This reads what that run left.
 */
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { verifyDrafter } from '../../src/stages/train/drafter.js';
import { parsePythonMetricDict, parseSpecforgeProgress } from '../../src/stages/train/specforge-progress.js';

const FIX = join(resolve(import.meta.dirname, '../..'), 'test/fixtures/real/aerie-hs-chain');
const text = (name: string) => readFile(join(FIX, name), 'utf8');
const json = async (name: string) => JSON.parse(await text(name));
const jsonl = async (name: string) =>
  (await text(name))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
const rc = async (name: string) =>
  (await text(name))
    .trim()
    .split('\n')
    .map((l) => Number(/^rc=(\d+)/.exec(l)![1]));
const steps = (log: string) => [...log.matchAll(/^step (\d+): \{/gm)].map((m) => Number(m[1]));
const lastDict = (log: string) => {
  const l = log
    .split('\n')
    .filter((x) => /^step \d+: \{/.test(x))
    .at(-1)!;
  return parsePythonMetricDict(l.slice(l.indexOf('{')));
};

describe('the chain up to the files', () => {
  it("tokens: every chat tokenized, aerie's ids equal SpecForge's own (the cross-check was required)", async () => {
    const summary = JSON.parse((await text('tokens.log')).trim().split('\n').at(-1)!).aerie_tokens;
    expect(summary).toMatchObject({ lines: 24, ok: 24, errors: 0, method: 'aerie+specforge' });
    expect((await text('tokens.rc')).trim()).toMatch(/--cross-check require/);
    expect(await rc('tokens.rc')).toEqual([0]);
  });

  it('capture: the SGLang capture ids of the draft layers, one dump per sample, nothing left half-written', async () => {
    const cap = JSON.parse((await text('capture.log')).trim().split('\n').at(-1)!).capture;
    expect(cap).toMatchObject({
      L: 8,
      H: 256,
      draft_layer_ids: [1, 3, 4],
      sglang_capture_ids: [2, 4, 5],
      layer_off_capture_ids: [3, 5, 6],
      tmp_left: [],
      device: 'cuda',
    });
    expect(cap.written).toEqual({ true: 24, layer_off: 24 });
    const h = await json('dump-s000-header.json');
    expect(h.__metadata__).toMatchObject({
      format: 'aerie-hs/1',
      rid: 's000',
      aux_layers: '[2, 4, 5]',
      tp_rank: '0',
      tokens: String(cap.tokens[0]),
    });
    expect(h.aux_hidden_state).toEqual({ dtype: 'BF16', shape: [cap.tokens[0], 768] });
    expect(h.hidden_state).toEqual({ dtype: 'BF16', shape: [cap.tokens[0], 256] });
  });

  it('self-check passes the true states: assistant tokens predicted, post-norm final, the reference finds the configured layers', async () => {
    const v = await json('selfcheck-true.json');
    expect(await rc('selfcheck-true.rc')).toEqual([0]);
    expect(v.ok).toBe(true);
    expect(v.messages).toEqual([]);
    expect(v.samples).toBe(24);
    expect(v.checks.teacher.figures.agreement_next).toBeGreaterThan(0.9);
    expect(v.checks.teacher.figures.distinct_same).toBeLessThan(0.05);
    // one last position's argmax differs from the fp32 greedy token by less than bf16 rounding
    const g = v.checks.greedy.figures;
    expect(g.checked).toBe(24);
    expect(g.exact + g.within_bf16).toBe(24);
    expect(Math.abs(v.checks.final.figures.norm_rms_median - 1)).toBeLessThan(0.01);
    expect(v.checks.reference.figures).toMatchObject({
      aux_expected_layer_input: [2, 4, 5],
      aux_best_layer_input: [2, 4, 5],
      final_best: 8,
    });
  });

  it('self-check fails states taken one layer off: the reference forward names the layers actually captured', async () => {
    const v = await json('selfcheck-layer-off.json');
    expect(await rc('selfcheck-layer-off.rc')).toEqual([1]);
    expect(v.ok).toBe(false);
    expect(v.checks.reference.ok).toBe(false);
    expect(v.checks.reference.figures.aux_best_layer_input).toEqual([3, 5, 6]);
    expect(v.checks.reference.messages[0]).toMatch(
      /aux block 0 matches the input of layer 3 .*not the configured input of layer 2/,
    );
    // the final state is still the true one: only the reference can see an aux capture point one off
    expect(v.checks.teacher.ok && v.checks.final.ok && v.checks.aux.ok).toBe(true);
  });

  it('self-check fails tokens shifted by one: hash and teacher agreement both say so, and in which direction', async () => {
    const v = await json('selfcheck-shifted.json');
    expect(await rc('selfcheck-shifted.rc')).toEqual([1]);
    expect(v.ok).toBe(false);
    expect(v.checks.tokens.messages[0]).toMatch(/input_ids_sha256 is not the sha256 of these input_ids/);
    const t = v.checks.teacher.figures;
    expect(t.agreement_next).toBeLessThan(0.2);
    expect(t.distinct_same).toBeGreaterThan(0.8);
    expect(v.checks.teacher.messages.join('\n')).toMatch(/states sit one token later than the ids/);
  });

  it('converter: one data_<i>.ckpt per sample that real torch.load read back equal to its dump and ids', async () => {
    expect(await rc('convert.rc')).toEqual([0]);
    expect((await text('convert.log')).trim().split('\n').at(-1)).toBe(
      'END written=24 skipped=0 missing=0 rejected=0 failed=0',
    );
    const c = await json('converted-check.json');
    const ids = await jsonl('ids.jsonl');
    expect(c).toMatchObject({ files: 24, index_rows: 24 });
    const T = ids[0].input_ids.length;
    expect(c.data_0).toEqual({
      input_ids: `torch.int64 [${T}]`,
      loss_mask: `torch.int64 [${T}]`,
      aux_hidden_state: `torch.bfloat16 [1, ${T}, 768]`,
      hidden_state: `torch.bfloat16 [1, ${T}, 256]`,
    });
    const index = await jsonl('index.jsonl');
    expect(index.map((r) => r.id)).toEqual(ids.map((r) => r.id));
    expect(index.map((r) => r.i)).toEqual(ids.map((_, i) => i));
  });
});

describe('real SpecForge a6b6b023 on those files', () => {
  it("trains offline from the converter's directory with the config aerie rendered", async () => {
    const cfg = parseYaml(await text('specforge.yaml')) as Record<string, Record<string, unknown>>;
    expect(cfg.data!.hidden_states_path).toBe('/tmp/real2/aerie/runs/r1/hidden_states');
    expect(cfg.model!.vocab_mapping_path).toBeUndefined(); // the converter writes none; SpecForge derived it
    expect(await text('aerie-plan.txt')).toMatch(/specforge train/);
  });

  it('the killed run: SIGKILL at step 8, progress read by aerie up to there', async () => {
    const log = await text('kill.log');
    expect(await rc('kill.rc')).toEqual([137]);
    expect(steps(log)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const p = parseSpecforgeProgress(log);
    expect(p.step).toBe(8);
    expect(p.loss).toBe(lastDict(log).loss);
    expect(Number.isFinite(p.loss)).toBe(true);
  });

  it('the resume from the newest complete checkpoint runs steps 5…16 and notes the rewind of step 8', async () => {
    expect((await text('resume-from.txt')).trim()).toBe('/tmp/real2/aerie/runs/r1/train/output/tiny-step4');
    const log = await text('resume.log');
    expect(await rc('resume.rc')).toEqual([0]);
    expect(steps(log)).toEqual([5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16]);
    const p = parseSpecforgeProgress(log);
    expect(p.step).toBe(16);
    expect(p.loss).toBe(lastDict(log).loss);
    // the resumed run replays step 8 exactly: same data order, same weights and optimizer state
    const loss8 = (l: string) =>
      parsePythonMetricDict(
        l
          .split('\n')
          .find((x) => x.startsWith('step 8: {'))!
          .slice(8),
      ).loss;
    expect(loss8(log)).toBe(loss8(await text('kill.log')));
    expect(p.rewound).toMatch(/rewinding checkpoint timeline at step 8/);
  });

  it('the export of step 16 is a drafter aerie accepts', async () => {
    expect(await rc('export.rc')).toEqual([0]);
    expect(await text('export.rc')).toMatch(/--checkpoint \/tmp\/real2\/aerie\/runs\/r1\/train\/output\/tiny-step16 /);
    const config = (await json('export-config.json')) as unknown;
    const {
      header_bytes: _len,
      __metadata__,
      ...tensors
    } = (await json('export-safetensors-header.json')) as Record<string, { dtype: string; shape: number[] }>;
    // names, dtypes and shapes were kept, not offsets: lay the tensors out back to back
    const width: Record<string, number> = { BF16: 2, F16: 2, F32: 4, I64: 8, BOOL: 1 };
    let at = 0;
    const header: Record<string, unknown> = { __metadata__ };
    for (const [name, t] of Object.entries(tensors)) {
      const bytes = t.shape.reduce((a, b) => a * b, 1) * width[t.dtype]!;
      header[name] = { ...t, data_offsets: [at, at + bytes] };
      at += bytes;
    }
    expect(verifyDrafter(config, header)).toEqual([]);
    expect(tensors['fc.weight']).toEqual({ dtype: 'BF16', shape: [256, 768] });
    expect(tensors.d2t).toEqual({ dtype: 'I64', shape: [512] });
  });
});
