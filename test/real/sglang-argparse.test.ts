/**
 * SGLang's own argument parser judges every SGLang launch line aerie renders: each example's
 * plan (generate, extract, deploy, baseline), the extraction capture modes and the deploy
 * variants, on the release each line is for. The parsers are the PyPI wheels' own
 * (scripts/setup-sglang.sh, one venv per release), run by scripts/real/sglang_argparse.py as
 * prepare_server_args runs them; nothing here imitates SGLang. See scripts/real/SGLANG-ARGPARSE.md.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { renderServerArgv } from '../../src/sglang/launch-argv.js';
import { type Case, cases, flags, judge, type Verdict, type Version, VERSIONS } from './sglang-lines.js';

// sglang==0.5.23:srt/server_args.py:410-415 registers --disable-cuda-graph with
// DeprecatedStoreTrueAction (srt/arg_groups/argparse_actions.py:77-100), which logs this and
// still stores True (conformance.md S9). 0.5.4, 0.5.9 and 0.5.12 take the flag silently.
const DISABLE_CUDA_GRAPH_DEPRECATED =
  "'--disable-cuda-graph' is deprecated and will be removed in a future release. Use '--cuda-graph-backend-{decode,prefill}=disabled' instead.";

/** The warnings each release prints for a line aerie renders: none (0.5.23 gets the per-phase backends instead). */
function expectedWarnings(_version: Version, _argv: string[]): string[] {
  return [];
}

describe("SGLang's own parser accepts every launch line aerie renders, on the release it is for", () => {
  let all: Case[];
  const judged = new Map<Version, { cases: Case[]; verdicts: Verdict[] }>();

  beforeAll(async () => {
    all = await cases();
    for (const v of VERSIONS) {
      const mine = all.filter((c) => c.versions.includes(v));
      judged.set(v, {
        cases: mine,
        verdicts: judge(
          v,
          mine.map((c) => c.argv),
        ).verdicts,
      });
    }
  });

  it('covers every example, each stage that launches a server, both capture releases, both stock passes and each deploy algorithm', () => {
    const names = all.map((c) => c.name).join('\n');
    for (const stage of [
      'generate · launch generate server',
      'extract · launch extract server',
      'deploy · launch deploy server',
      'benchmark · launch baseline server',
    ]) {
      expect(names).toContain(stage);
    }
    for (const mode of [
      'plugin capture on 0.5.12',
      'plugin capture on 0.5.23',
      'stock-aux',
      'stock-final',
      'deploy NGRAM',
      'deploy NEXTN',
    ])
      expect(names).toContain(mode);
    expect(new Set(all.map((c) => c.name.split(' ')[0])).size).toBeGreaterThanOrEqual(4);
    for (const v of VERSIONS) expect(judged.get(v)!.cases.length, `nothing judged on ${v}`).toBeGreaterThan(10);
  });

  for (const v of VERSIONS) {
    it(`SGLang ${v}: every line for it parses (exit 0)${v === '0.5.23' ? ' and passes the model-independent validation' : ''}, with no stand-in touched`, () => {
      const { cases: mine, verdicts } = judged.get(v)!;
      const rejected = mine.flatMap((c, i) =>
        verdicts[i]!.ok
          ? []
          : [
              `${c.name}: exit ${verdicts[i]!.exit}: ${verdicts[i]!.error ?? verdicts[i]!.validation_error}\n  ${c.argv.join(' ')}`,
            ],
      );
      expect(rejected, `SGLang ${v}'s parser rejects lines aerie renders for it`).toEqual([]);
      const touched = mine.flatMap((c, i) => verdicts[i]!.standins_touched.map((t) => `${c.name}: ${t}`));
      expect(touched, "the parse used a module stood in for: the verdict is not the real parser's").toEqual([]);
    });

    it(`SGLang ${v}: the deprecation warnings its parser prints for aerie's lines`, () => {
      const { cases: mine, verdicts } = judged.get(v)!;
      for (const [i, c] of mine.entries()) {
        expect(verdicts[i]!.warnings, `${c.name} on ${v}: ${c.argv.join(' ')}`).toEqual(expectedWarnings(v, c.argv));
      }
    });
  }

  it('on 0.5.23, the extraction lines use the per-phase CUDA-graph backends, which print no deprecation (S9)', () => {
    const { cases: mine, verdicts } = judged.get('0.5.23')!;
    const extraction = mine.filter((c) => c.argv.includes('--disable-radix-cache'));
    expect(extraction.length).toBeGreaterThan(0);
    for (const c of extraction) expect(c.argv).not.toContain('--disable-cuda-graph');
    expect(mine.filter((_, i) => verdicts[i]!.warnings.length > 0).map((c) => c.name)).toEqual([]);
  });
});

describe('the judge can say no', () => {
  it("0.5.23 rejects the flags the simulator accepts (S8), with argparse's exit 2 and message", () => {
    const v = judge('0.5.23', [
      ['--model-path', '/m', '--stream-output'],
      ['--model-path', '/m', '--cuda-graph-max-bs', '8'],
      ['--model-path', '/m', '--cuda-graph-bs', '8'],
    ]).verdicts;
    expect(v.map((x) => [x.exit, x.error])).toEqual([
      [2, 'unrecognized arguments: --stream-output'],
      [2, 'ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill'],
      [2, expect.stringMatching(/^ambiguous option: --cuda-graph-bs could match /)],
    ]);
  });

  it("0.5.23's validation refuses an aux capture that loads a draft (validation_hook.py:718-722), after the parse accepted it", () => {
    const [v] = judge('0.5.23', [
      [
        '--model-path',
        '/m',
        '--enable-return-aux-hidden-states',
        '--speculative-algorithm',
        'EAGLE3',
        '--speculative-draft-model-path',
        '/d',
      ],
    ]).verdicts;
    expect([v!.ok, v!.exit, v!.validation_error]).toEqual([
      false,
      0,
      '--enable-return-aux-hidden-states captures without a draft; drop --speculative-draft-model-path.',
    ]);
  });

  it("0.5.4, 0.5.9 and 0.5.12 have no --enable-return-aux-hidden-states: 0.5.23's capture line is for 0.5.23 only", () => {
    const line = flags(
      renderServerArgv({
        launcher: ['python3', '-m', 'sglang.launch_server'],
        modelPath: '/m',
        port: 30000,
        tpSize: 1,
        extraction: true,
        extraArgs: [],
        capture: { sglangVersion: '0.5.23', draftLayerIds: [1, 15, 28] },
      }),
    );
    for (const v of ['0.5.4', '0.5.9', '0.5.12'] as const) {
      const [verdict] = judge(v, [line]).verdicts;
      expect([verdict!.exit, verdict!.error]).toEqual([
        2,
        'unrecognized arguments: --cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled --enable-return-aux-hidden-states --return-aux-hidden-state-layer-ids 1 15 28',
      ]);
    }
  });

  it('0.5.23 prints its deprecation for the old --disable-cuda-graph spelling (which aerie renders only for older releases)', () => {
    expect(judge('0.5.23', [['--model-path', '/m', '--disable-cuda-graph']]).verdicts[0]!.warnings).toEqual([
      DISABLE_CUDA_GRAPH_DEPRECATED,
    ]);
  });

  it('the replacement 0.5.23 names for --disable-cuda-graph parses clean on 0.5.23 only: the fix is per release', () => {
    const line = [
      '--model-path',
      '/m',
      '--cuda-graph-backend-decode',
      'disabled',
      '--cuda-graph-backend-prefill',
      'disabled',
      '--disable-radix-cache',
    ];
    const [v23] = judge('0.5.23', [line]).verdicts;
    expect([v23!.ok, v23!.warnings]).toEqual([true, []]);
    for (const v of ['0.5.4', '0.5.9', '0.5.12'] as const) {
      expect(judge(v, [line]).verdicts[0]!.error).toBe(
        'unrecognized arguments: --cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled',
      );
    }
  });

  it('the watch over the stand-ins sees a use of one', () => {
    for (const v of VERSIONS)
      expect(judge(v, [], 'torch').watch_self_test).toEqual(
        expect.arrayContaining(['torch.cuda', 'torch.cuda.is_available()']),
      );
  });
});
