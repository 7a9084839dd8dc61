/**
 * One test harness (issue 14): test files get their processes, servers, temp folders, hosts and
 * Temporal pieces from test/support/, which stops each by its recorded id and removes what it
 * made. A test whose point is a hand-built process (the fault it injects, the listener it
 * tests) says so on the line above with `// harness-exception: <why>`; the few files whose
 * whole point is such a process are listed below with the reason.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const TEST = join(ROOT, 'test');

/** What only test/support/ may do. */
const FORBIDDEN: { what: string; re: RegExp }[] = [
  {
    what: "a value import of node:child_process (spawn by hand; use test/support's run/useProcessGroups)",
    re: /^import (?!type\b)[^;]*from 'node:child_process'/m,
  },
  { what: 'mkdtemp (use useWorkdir / useLocalHost / useTempDirs)', re: /\bmkdtemp(Sync)?\(/ },
  { what: 'new LocalHost( (use useLocalHost)', re: /\bnew LocalHost\(/ },
  { what: 'createServer( (use startFakeServer)', re: /\bcreateServer\(/ },
  { what: 'process.kill( (use signalGroup / the recorded launch)', re: /\bprocess\.kill\(/ },
  { what: 'Worker.create( (use useTemporalSuite / workflow-env)', re: /\bWorker\.create\(/ },
  { what: 'NativeConnection.connect( (use useTemporalSuite)', re: /\bNativeConnection\.connect\(/ },
  { what: 'TestWorkflowEnvironment (use test/support/workflow-env.ts)', re: /\bTestWorkflowEnvironment\b/ },
];

/** Files whose subject is the hand-built process itself. */
const FILE_EXCEPTIONS: Record<string, string> = {
  'test/hosts/proc-helpers.ts': 'startUnrelated: a decoy process group the process-group killer must leave alone',
  'test/hosts/escape-helpers.ts':
    "a torchrun-like launcher and decoys the escape scan must not take for the launch's own",
  'test/cli/run-quiet.test.ts': 'spawns `aerie run` itself: its terminal output is what the test checks',
  'test/layout/file-size.test.ts': 'runs `git ls-files` to list what it checks',
};

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return name === 'support' || name === 'fixtures' ? [] : files(p);
    return /\.(ts|mts|mjs)$/.test(name) ? [p] : [];
  });
}

/** A hit on a line whose previous line (or itself) carries a harness-exception comment with a reason is allowed. */
function violations(text: string): string[] {
  const lines = text.split('\n');
  const out: string[] = [];
  for (const { what, re } of FORBIDDEN) {
    const global = new RegExp(re.source, re.flags.includes('g') ? re.flags : `${re.flags}g`);
    for (const m of text.matchAll(global)) {
      const line = text.slice(0, m.index).split('\n').length - 1;
      const near = [lines[line - 1] ?? '', lines[line] ?? ''];
      if (near.some((l) => /\/\/\s*harness-exception:\s*\S/.test(l))) continue;
      out.push(`line ${line + 1}: ${what}`);
    }
  }
  return out;
}

describe('test harness', () => {
  it('every test file gets processes, servers, folders, hosts and Temporal from test/support/', () => {
    const found = files(TEST)
      .map((p) => ({ rel: relative(ROOT, p), text: readFileSync(p, 'utf8') }))
      .filter(({ rel }) => !(rel in FILE_EXCEPTIONS) && rel !== 'test/layout/test-harness.test.ts')
      .flatMap(({ rel, text }) => violations(text).map((v) => `${rel} ${v}`));
    expect(found, 'use the test/support/ helper named, or mark the line `// harness-exception: <why>`').toEqual([]);
  });

  it('each listed exception still exists and still needs its exception', () => {
    for (const rel of Object.keys(FILE_EXCEPTIONS)) {
      expect(violations(readFileSync(join(ROOT, rel), 'utf8')).length, rel).toBeGreaterThan(0);
    }
  });

  it('sees a hand-built process, and accepts one that says why', () => {
    expect(violations("import { spawn } from 'node:child_process';\n")).toHaveLength(1);
    expect(violations("import type { ChildProcess } from 'node:child_process';\n")).toEqual([]);
    expect(violations('const s = createServer();\n')).toHaveLength(1);
    expect(violations('// harness-exception: the listener under test\nconst s = createServer();\n')).toEqual([]);
    expect(violations('// harness-exception:\nconst s = createServer();\n')).toHaveLength(1);
  });
});
