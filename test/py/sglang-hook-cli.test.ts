/**
 * `python -m aerie_hs.sglang_hook` (py/aerie_hs/sglang_hook.py's CLI) run as aerie runs it on a
 * host (COMMON.md wave 3): py/aerie_hs/*.py copied to <workdir>/aerie-py/<sha12>/aerie_hs/, the CLI
 * run from that folder with the machine's python3, no SGLang and no torch importable.
 */
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { pythonOut, pythonSync } from '../support/python.js';
import { useWorkdir } from '../support/workdir.js';

const ROOT = resolve(import.meta.dirname, '../..');
const tmp = useWorkdir('aerie-hook-cli-');
let work: string;
let staged: string;
let poison: string;

beforeAll(() => {
  work = tmp.path;
  staged = join(work, 'aerie-py', '0123456789ab');
  mkdirSync(join(staged, 'aerie_hs'), { recursive: true });
  for (const f of readdirSync(join(ROOT, 'py/aerie_hs')).filter((f) => f.endsWith('.py'))) {
    copyFileSync(join(ROOT, 'py/aerie_hs', f), join(staged, 'aerie_hs', f));
  }
  // torch and sglang that fail on import: the CLI must run on a host python that has neither.
  poison = join(work, 'poison');
  for (const m of ['torch', 'sglang']) {
    mkdirSync(join(poison, m), { recursive: true });
    writeFileSync(join(poison, m, '__init__.py'), `raise ImportError("test: the CLI imported ${m}")\n`);
  }
});

function cli(...args: string[]): { code: number; stdout: string; stderr: string } {
  // The staged folder is the cwd (python -m finds aerie_hs there); the poison is all PYTHONPATH holds.
  const r = pythonSync(['-m', 'aerie_hs.sglang_hook', ...args], {
    cwd: staged,
    pythonPath: false,
    env: { PYTHONPATH: poison },
  });
  return { code: r.code ?? -1, stdout: r.stdout, stderr: r.stderr };
}

describe('python -m aerie_hs.sglang_hook plugin-dist', () => {
  it("writes the dist-info in the staged folder, prints its path, and SGLang's entry-point lookup then loads the plugin", () => {
    const r = cli('plugin-dist', staged);
    expect(r).toMatchObject({ code: 0, stderr: '' });
    const dist = join(staged, 'aerie_hs_capture-1.dist-info');
    expect(r.stdout).toBe(dist + '\n');
    expect(readFileSync(join(dist, 'entry_points.txt'), 'utf8')).toBe(
      '[sglang.srt.plugins]\naerie_hs_capture = aerie_hs.sglang_hook:plugin\n',
    );
    // What sglang/srt/plugins/__init__.py does (entry_points(group=...) then .load()), from
    // another folder with only the staged one on PYTHONPATH, as the extraction server is launched.
    const loaded = pythonOut(
      String.raw`
import importlib.metadata as md, json
eps = [e for e in md.entry_points(group="sglang.srt.plugins") if e.name == "aerie_hs_capture"]
f = eps[0].load()
print(json.dumps([len(eps), f.__module__, f.__name__]))
`,
      [],
      { cwd: work, pythonPath: false, env: { PYTHONPATH: staged } },
    );
    expect(JSON.parse(loaded)).toEqual([1, 'aerie_hs.sglang_hook', 'plugin']);
  });

  it('refuses a folder without the aerie_hs package (the entry point could not import), exit 2', () => {
    const empty = join(work, 'empty');
    mkdirSync(empty);
    const r = cli('plugin-dist', empty);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/holds no aerie_hs\/sglang_hook\.py: copy py\/aerie_hs\/ there first/);
    expect(existsSync(join(empty, 'aerie_hs_capture-1.dist-info'))).toBe(false);
  });
});

describe('python -m aerie_hs.sglang_hook check', () => {
  const fit023 = [
    '--model-path',
    '/m',
    '--tp',
    '8',
    '--disable-radix-cache',
    '--enable-return-aux-hidden-states',
    '--speculative-algorithm',
    'EAGLE3',
    '--return-aux-hidden-state-layer-ids',
    '1',
    '7',
    '13',
  ];

  it('says ok with exit 0 for the contract launch on 0.5.23, and for a fit 0.5.12 launch', () => {
    const ok = cli('check', '--version', '0.5.23', '--', ...fit023);
    expect([ok.code, ok.stderr, JSON.parse(ok.stdout)]).toEqual([0, '', { ok: true, version: '0.5.23', fixes: [] }]);
    const r = cli('check', '--version=0.5.12', '--', '--model-path', '/m', '--disable-radix-cache');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ ok: true, version: '0.5.12', fixes: [] });
  });

  it("lists each fix with exit 1, server flags after `--` taken as the server's, not the CLI's", () => {
    const r = cli(
      'check',
      '--version',
      '0.5.23',
      '--',
      '--model-path',
      '/m',
      '--version',
      '9',
      '--enable-dp-attention',
      '--pp-size=2',
    );
    expect(r.code).toBe(1);
    const out = JSON.parse(r.stdout) as { ok: boolean; version: string; fixes: string[] };
    expect(out).toMatchObject({ ok: false, version: '0.5.23' });
    expect(out.fixes.map((f) => f.split(' ').slice(0, 2).join(' '))).toEqual([
      'add --disable-radix-cache:',
      'drop --enable-dp-attention:',
      'use --pp-size',
      'add --enable-return-aux-hidden-states',
      'add --speculative-algorithm',
    ]);
    const drafted = cli(
      'check',
      '--version',
      '0.5.12',
      '--',
      '--disable-radix-cache',
      '--speculative-algorithm',
      'EAGLE3',
    );
    expect([drafted.code, (JSON.parse(drafted.stdout) as { fixes: string[] }).fixes]).toEqual([
      1,
      [expect.stringMatching(/^drop --speculative-algorithm/)],
    ]);
  });

  it("refuses an unsupported version with exit 2 and check_version's message, on stderr and in the JSON", () => {
    const r = cli('check', '--version', '0.5.14', '--', ...fit023);
    expect(r.code).toBe(2);
    const msg =
      "aerie's hidden-state capture supports SGLang 0.5.12, 0.5.23; this server runs SGLang 0.5.14. Pin the extraction launcher's SGLang to a supported release, or use the stock producer (extract.producer: stock) on 0.5.23.";
    expect(JSON.parse(r.stdout)).toEqual({ ok: false, version: '0.5.14', fixes: [], error: msg });
    expect(r.stderr).toBe(msg + '\n');
  });

  it('answers a usage error with exit 2, a reason and the usage, and nothing on stdout', () => {
    for (const [args, why] of [
      [['check', '--version', '0.5.23', '--model-path', '/m'], /check needs `--` before the server's argv/],
      [['check', '--', '--model-path', '/m'], /check takes --version V before `--`, got \[\]/],
      [['plugin-dist'], /plugin-dist takes one folder/],
      [[], /unknown command \[\]/],
    ] as [string[], RegExp][]) {
      const r = cli(...args);
      expect([r.code, r.stdout], args.join(' ')).toEqual([2, '']);
      expect(r.stderr).toMatch(why);
      expect(r.stderr).toMatch(/usage: python -m aerie_hs\.sglang_hook plugin-dist DIR/);
    }
  });
});
