/**
 * The house rules for imports, checked over src/ as it is on disk: no import cycles (type-only
 * imports count: a cycle of types is the same tangle for a reader), lower layers never reach
 * up to Temporal or the layers that use it, and a folder of src/stages or src/hosts is entered
 * through its index.ts from outside. The import graph comes from the TypeScript compiler's
 * own pre-processor, so comments and strings that look like imports do not count.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const SRC = join(ROOT, 'src');

/** Layers below the Temporal ones: they must run (and be tested) without a worker. */
const LOWER = ['stages', 'hosts', 'sglang', 'engines', 'config', 'bench', 'ledger'];
/** What they may not import: the Temporal layers of aerie itself. */
const UPPER = ['activities', 'workflows', 'cli', 'temporal', 'worker.ts'];

interface Edge {
  from: string;
  spec: string;
  /** The file it resolves to, relative to src/; undefined for a package. */
  to?: string;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith('.ts') ? [p] : [];
  });
}

function resolveImport(fromFile: string, spec: string): string {
  const base = resolve(dirname(fromFile), spec);
  const candidates = [base.replace(/\.js$/, '.ts'), `${base}.ts`, join(base, 'index.ts')];
  const hit = candidates.find((c) => existsSync(c) && statSync(c).isFile());
  if (!hit) throw new Error(`${relative(ROOT, fromFile)}: import '${spec}' resolves to no file`);
  return relative(SRC, hit);
}

function importGraph(): Map<string, Edge[]> {
  const graph = new Map<string, Edge[]>();
  for (const file of sourceFiles(SRC)) {
    const from = relative(SRC, file);
    const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
    graph.set(
      from,
      info.importedFiles.map(({ fileName: spec }) => ({
        from,
        spec,
        to: spec.startsWith('.') ? resolveImport(file, spec) : undefined,
      })),
    );
  }
  return graph;
}

/** Strongly connected components with more than one file (or a file importing itself): Tarjan's algorithm. */
function cycles(graph: Map<string, Edge[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const { to: w } of graph.get(v) ?? []) {
      if (w === undefined) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || (graph.get(v) ?? []).some((e) => e.to === v)) found.push(scc.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

/** One line per cycle: each member with the members it imports, so the misplaced item is easy to see. */
function describeCycle(graph: Map<string, Edge[]>, scc: string[]): string {
  const members = new Set(scc);
  return scc
    .map(
      (f) =>
        `${f} -> ${[...new Set((graph.get(f) ?? []).filter((e) => e.to && members.has(e.to)).map((e) => e.to))].join(', ')}`,
    )
    .join('; ');
}

const topOf = (file: string): string => file.split('/')[0]!;

/** The folder of src/stages or src/hosts a file lives in (src/stages/extract), or undefined at their top level. */
function ownerFolder(file: string): string | undefined {
  const parts = file.split('/');
  return (parts[0] === 'stages' || parts[0] === 'hosts') && parts.length > 2 ? `${parts[0]}/${parts[1]}` : undefined;
}

describe('src/ import layout', () => {
  const graph = importGraph();
  const edges = [...graph.values()].flat();

  it('has no import cycles', () => {
    expect(cycles(graph).map((scc) => describeCycle(graph, scc))).toEqual([]);
  });

  it('keeps Temporal and the layers that use it out of stages, hosts, sglang, engines, config, bench and ledger', () => {
    const upward = edges
      .filter((e) => LOWER.includes(topOf(e.from)))
      .filter((e) => (e.to === undefined ? e.spec.startsWith('@temporalio/') : UPPER.includes(topOf(e.to))))
      .map((e) => `${e.from} imports '${e.spec}'`);
    expect(upward).toEqual([]);
  });

  it('enters a folder of src/stages or src/hosts only through its index.ts from outside it', () => {
    const deep = edges
      .filter((e) => e.to !== undefined && ownerFolder(e.to) !== undefined)
      .filter((e) => ownerFolder(e.from) !== ownerFolder(e.to!) && !e.to!.endsWith('/index.ts'))
      // src/hosts/index.ts is the face of all of src/hosts; outside src/hosts that is the way in.
      .map((e) => `${e.from} imports ${e.to}`);
    expect(deep).toEqual([]);
  });

  it('reaches a host folder from outside src/hosts only through src/hosts/index.ts', () => {
    const deep = edges
      .filter((e) => e.to?.startsWith('hosts/') && ownerFolder(e.to) !== undefined && topOf(e.from) !== 'hosts')
      .map((e) => `${e.from} imports ${e.to}`);
    expect(deep).toEqual([]);
  });

  it('counts a cycle closed by a type-only import, and a file importing itself', () => {
    const g = new Map<string, Edge[]>([
      ['a.ts', [{ from: 'a.ts', spec: './b.js', to: 'b.ts' }]],
      ['b.ts', [{ from: 'b.ts', spec: './a.js', to: 'a.ts' }]], // `import type` edges are in preProcessFile's list too
      ['c.ts', [{ from: 'c.ts', spec: './c.js', to: 'c.ts' }]],
      ['d.ts', [{ from: 'd.ts', spec: './a.js', to: 'a.ts' }]],
    ]);
    expect(cycles(g)).toEqual([['a.ts', 'b.ts'], ['c.ts']]);
    const types = ts.preProcessFile(
      "import type { Run } from './context.js';\n// import { x } from './not-an-import.js'",
      true,
      true,
    );
    expect(types.importedFiles.map((f) => f.fileName)).toEqual(['./context.js']);
  });

  it('sees the whole tree (the walk found the layers it checks)', () => {
    for (const layer of [...LOWER, 'activities', 'workflows', 'cli'])
      expect([...graph.keys()].some((f) => topOf(f) === layer)).toBe(true);
    expect(edges.length).toBeGreaterThan(500);
  });
});
