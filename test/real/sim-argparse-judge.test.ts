/**
 * The simulator's launch-flag parser (sim/sglang/args.ts) judged by each release's real one:
 * every launch line aerie renders, the S8/S9 lines, deprecated and retired flags, typos, bad
 * ints, floats and choices, missing values and --model-path, abbreviations and ambiguous
 * prefixes go through SGLang X's own parser (.venv-sglang-X, scripts/real/sglang_argparse.py)
 * and through parseLaunchArgs(argv, X); they must agree on accept or reject, the exit status,
 * the prog argparse names, the error line, and the deprecation notes. A few rejections also go
 * through `aerie-sim sglang --version X`, which must print the same last line and exit 2.
 * The flag table the simulator parses with (sim/sglang/args-flags.json) must be what the real
 * parsers declare, option for option.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { AERIE_HOME } from '../../src/config/load.js';
import { ArgparseError, parseLaunchArgs, REAL_OPTIONS, SIM_FLAG_NAMES } from '../../sim/sglang/args.js';
import { PyError } from '../../sim/sglang/tracebacks.js';
import { runSync } from '../support/processes.js';
import { runSimCli } from '../support/sim.js';
import { useWorkdir } from '../support/workdir.js';
import { cases, judge, type Verdict, type Version, VERSIONS } from './sglang-lines.js';

const M = ['--model-path', '/m'];

/** Lines that are not aerie's: what a researcher's extra-args or a typo gives the launcher. */
const PROBES: string[][] = [
  // S8 and S9, and the flags that replaced them.
  [...M, '--stream-output'],
  [...M, '--incremental-streaming-output'],
  [...M, '--cuda-graph-max-bs', '8'],
  [...M, '--cuda-graph-max-bs=8'],
  [...M, '--cuda-graph-bs', '1', '2', '4'],
  [...M, '--cuda-graph-max-bs-decode', '8'],
  [...M, '--disable-cuda-graph'],
  [...M, '--cuda-graph-backend-decode', 'disabled', '--cuda-graph-backend-prefill', 'disabled'],
  [...M, '--cuda-graph-backend-decode', 'tc_piecewise'],
  [...M, '--cuda-graph-backend-decode=bogus'],
  [...M, '--disable-piecewise-cuda-graph'],
  [...M, '--enable-beta-spec'],
  [...M, '--enable-return-aux-hidden-states', '--return-aux-hidden-state-layer-ids', '1', '15', '28'],
  [...M, '--return-aux-hidden-state-layer-ids'],
  [...M, '--return-hidden-states-mode', 'middle'],
  // Retired and deprecated flags, each release's own.
  [...M, '--enable-ep-moe'],
  [...M, '--hybrid-kvcache-ratio'],
  [...M, '--enable-piecewise-cuda-graph'],
  [...M, '--enable-dp-attention'],
  [...M, '--monokernel-backend', 'amd'],
  [...M, '--monokernel-backend', 'nvidia'],
  // Typos, leftovers, positionals.
  [...M, '--mem-fraction-statik', '0.8'],
  [...M, '--bogus', 'x', 'y'],
  [...M, 'stray'],
  [...M, '-x'],
  [...M, '--', '--port', '1'],
  ['--bogus'],
  // Values: ints, floats, choices, JSON, human-readable ints (0.5.12+), missing ones.
  [...M, '--port', 'abc'],
  [...M, '--port', '1.5'],
  [...M, '--port', ' 8 '],
  [...M, '--port=+7'],
  [...M, '--port', '1_000'],
  [...M, '--tp-size', '-1'],
  [...M, '--mem-fraction-static', 'abc'],
  [...M, '--mem-fraction-static', '1e-1'],
  [...M, '--mem-fraction-static', 'inf'],
  [...M, '--speculative-algorithm', 'MEDUSA'],
  [...M, '--dtype', 'float17'],
  [...M, '--load-format', 'nope'],
  [...M, '--context-length', '32k'],
  [...M, '--context-length', '1.5Ki'],
  [...M, '--context-length', 'lots'],
  [...M, '--json-model-override-args', '{"a": 1}'],
  [...M, '--port'],
  [...M, '--port', '--host', 'h'],
  [...M, '--trust-remote-code=yes'],
  [...M, '--port', 'abc', '--cuda-graph-max-bs', '8'],
  [...M, '--bogus', '--port', 'abc'],
  // nargs ?, *, +; JSON and nullable types; negated booleans; explicit and empty values.
  [...M, '--lora-paths'],
  [...M, '--lora-paths', 'a', 'b', '--port', '1'],
  [...M, '--lora-target-modules', 'q_proj', 'bogus_proj'],
  [...M, '--bucket-time-to-first-token', '0.1', 'x'],
  [...M, '--tokenizer-metrics-allowed-custom-labels'],
  [...M, '--model-checksum'],
  [...M, '--model-checksum', 'abc'],
  [...M, '--hybrid-kvcache-ratio', '0.5'],
  [...M, '--extra-metric-labels', '{bad'],
  [...M, '--extra-metric-labels', '{"a": "b"}'],
  [...M, '--piecewise-cuda-graph-tokens', '[1, 2'],
  [...M, '--no-experts-shared-outer-loras'],
  [...M, '--no-experts-shared-outer-loras=1'],
  [...M, '--quantization-param-path', 'None'],
  [...M, '--enable-metrics', '--enable-metrics'],
  [...M, '--enable-metrics='],
  [...M, '--port='],
  [...M, '--port', '-5'],
  [...M, '--host', 'a b'],
  [...M, '--a b'],
  [...M, '--mem-fraction-static', '.5'],
  [...M, '--mem-fraction-static', '5.'],
  [...M, '--mem-fraction-static', '1_0.5'],
  [...M, '--mem-fraction-static', 'nan'],
  [...M, '--mem-fraction-static', '0x10'],
  [...M, '--mem-fraction-static', '1e5x'],
  [...M, '--max-total-tokens', '1.5k'],
  [...M, '--max-total-tokens', '2Mi'],
  // --model-path.
  ['--model-path'],
  ['--model-path', '-5'],
  ['--model-path=/m'],
  ['--help'],
  [],
  ['--port', '1'],
  ['--model', '/m'],
  ['--model=/m', '--port', '1'],
  // Abbreviations: unique, ambiguous, an alias's own prefix.
  [...M, '--tp', '8'],
  [...M, '--mem-frac', '0.8'],
  [...M, '--disable-radix', '--max-running', '8'],
  [...M, '--speculative-draft', '/d'],
  [...M, '--speculative-draft-model', '/d'],
  [...M, '--enable-metric'],
  [...M, '--chunked', '4096'],
  [...M, '--log', 'debug'],
  [...M, '--host=0.0.0.0', '--port=1'],
  [...M, '-h'],
];

interface Outcome {
  exit: number;
  /** The last stderr line on a rejection: argparse's `<prog>: error: ...` or the exception. */
  last: string | null;
  prog: string | null;
  warnings: string[];
}

function real(v: Verdict): Outcome {
  // -h prints the whole help to stdout (the judge folds it into stderr): only its exit 0 is compared.
  return {
    exit: v.exit,
    last: v.error_line ?? v.exception,
    prog: v.exit === 2 ? v.usage_prog : null,
    warnings: v.warnings,
  };
}

function sim(argv: string[], release: Version): Outcome {
  try {
    const p = parseLaunchArgs(argv, release);
    return { exit: 0, last: null, prog: null, warnings: p.warnings };
  } catch (e) {
    if (e instanceof ArgparseError) {
      const lines = e.stderr.trimEnd().split('\n');
      const usage = lines.find((l) => l.startsWith('usage: '))!;
      return {
        exit: 2,
        last: lines.at(-1)!,
        prog: /^usage: (.*?) \[-h\]/.exec(usage)?.[1] ?? null,
        warnings: [...e.warnings],
      };
    }
    if (e instanceof PyError)
      return { exit: e.exitCode, last: e.traceback.trimEnd().split('\n').at(-1)!, prog: null, warnings: [] };
    throw e;
  }
}

describe("the simulator parses launch lines as each release's own parser does", () => {
  const judged = new Map<
    Version,
    { lines: { name: string; argv: string[] }[]; verdicts: Verdict[]; inventory: Record<string, unknown>[] }
  >();

  beforeAll(async () => {
    const rendered = await cases();
    for (const v of VERSIONS) {
      const lines = [
        ...rendered.filter((c) => c.versions.includes(v)).map((c) => ({ name: c.name, argv: c.argv })),
        ...PROBES.map((argv) => ({ name: `probe: ${argv.join(' ') || '(nothing)'}`, argv })),
      ];
      const out = judge(
        v,
        lines.map((l) => l.argv),
        undefined,
        true,
      );
      judged.set(v, { lines, verdicts: out.verdicts, inventory: out.inventory! });
    }
  });

  for (const v of VERSIONS) {
    it(`SGLang ${v}: the flag table the simulator parses with is the release's own, option for option`, () => {
      const mine = REAL_OPTIONS.filter((o) => o.in[v] !== undefined)
        .sort((a, b) => a.in[v]! - b.in[v]!)
        .map(({ in: _in, ...rest }) => rest);
      expect(mine).toEqual(judged.get(v)!.inventory);
    });

    it(`SGLang ${v}: same verdict, exit status, prog, error line and deprecation notes on every line`, () => {
      const { lines, verdicts } = judged.get(v)!;
      const differ = lines.flatMap((l, i) => {
        const r = real(verdicts[i]!);
        const s = sim(l.argv, v);
        return JSON.stringify(r) === JSON.stringify(s)
          ? []
          : [`${l.name}\n  real: ${JSON.stringify(r)}\n  sim:  ${JSON.stringify(s)}`];
      });
      expect(differ, `the simulator at ${v} parses these unlike SGLang ${v}`).toEqual([]);
    });
  }

  it("the probes reach every kind of outcome on some release: accepted, exit 2, a retired flag's exit 1, deprecation notes", () => {
    const all = VERSIONS.flatMap((v) => judged.get(v)!.verdicts.map(real));
    expect(all.some((o) => o.exit === 0 && o.warnings.length > 0)).toBe(true);
    expect(all.some((o) => o.exit === 1 && o.last?.startsWith('ValueError: '))).toBe(true);
    for (const kind of [
      'unrecognized arguments',
      'ambiguous option',
      'invalid int value',
      'invalid float value',
      'invalid choice',
      'expected one argument',
      'ignored explicit argument',
      'the following arguments are required',
    ]) {
      expect(
        all.some((o) => o.last?.includes(kind)),
        kind,
      ).toBe(true);
    }
  });

  it('every flag name the simulator acts on is a real option string of some release', () => {
    const real = new Set(REAL_OPTIONS.flatMap((o) => o.names));
    expect(SIM_FLAG_NAMES.filter((n) => !real.has(n))).toEqual([]);
  });

  const inv = useWorkdir('aerie-sglang-inv-');
  it('args-flags.json is byte for byte what scripts/real/sglang_argparse.py --merge-inventories writes from the four parsers', () => {
    const dir = inv.path;
    const files = VERSIONS.map((v) => {
      const file = join(dir, `${v}.json`);
      writeFileSync(file, JSON.stringify({ sglang: v, inventory: judged.get(v)!.inventory }));
      return file;
    });
    const res = runSync('python3', [
      join(AERIE_HOME, 'scripts', 'real', 'sglang_argparse.py'),
      '--merge-inventories',
      ...files,
    ]);
    expect(res.code, res.stderr).toBe(0);
    expect(
      res.stdout === readFileSync(join(AERIE_HOME, 'sim', 'sglang', 'args-flags.json'), 'utf8'),
      'regenerate it: for v in 0.5.4 0.5.9 0.5.12 0.5.23; do echo \'{"argvs": [], "inventory": true}\' | .venv-sglang-$v/bin/python scripts/real/sglang_argparse.py > /tmp/inv-$v.json; done; python3 scripts/real/sglang_argparse.py --merge-inventories /tmp/inv-*.json (in release order) > sim/sglang/args-flags.json',
    ).toBe(true);
  });
});

describe('aerie-sim sglang --version X refuses what SGLang X refuses, with its words and exit 2', () => {
  const LINES: [Version, string[]][] = [
    ['0.5.23', [...M, '--stream-output']],
    ['0.5.23', [...M, '--cuda-graph-max-bs', '8']],
    ['0.5.12', [...M, '--enable-return-aux-hidden-states']],
    ['0.5.4', [...M, '--cuda-graph-backend-decode', 'disabled']],
    ['0.5.9', [...M, '--port', 'abc']],
  ];
  it.each(LINES)('SGLang %s: %j', (v, argv) => {
    const [verdict] = judge(v, [argv]).verdicts;
    const res = runSimCli(['sglang', '--version', v, ...argv], {}, { timeoutMs: 60_000 });
    expect(verdict!.exit).toBe(2);
    expect([res.status, res.stderr.trimEnd().split('\n').at(-1)]).toEqual([2, verdict!.error_line]);
    expect(res.stderr.split('\n')[0]).toMatch(new RegExp(`^usage: ${verdict!.usage_prog} \\[-h\\] `));
  });
});
