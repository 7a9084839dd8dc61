/**
 * src/failures.ts is the one list of failure types: every type src/ raises is declared there,
 * every declared one is raised somewhere (or says why not), and the workflow's two lists are
 * its derivations. The sources are scanned with the TypeScript parser, so a type written in
 * a comment does not count and one written in any raising position does.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import {
  FAILURES,
  NON_RETRYABLE,
  SERVER_RELAUNCHABLE,
  type FailureKind,
  type FailureType,
} from '../../src/failures.js';
import { NON_RETRYABLE as POLICY } from '../../src/workflows/activities.js';
import { SERVER_RELAUNCHABLE as READINESS_RELAUNCHABLE } from '../../src/sglang/readiness.js';

const SRC = resolve(import.meta.dirname, '../../src');
const kinds = FAILURES as Record<FailureType, FailureKind>;
const declared = Object.keys(FAILURES) as FailureType[];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) return sourceFiles(p);
    return p.endsWith('.ts') ? [p] : [];
  });
}

/** The string literals an expression can evaluate to: a literal, either branch of a ?:, through parentheses and `satisfies`. */
function literals(e: ts.Expression | undefined): string[] {
  if (!e) return [];
  if (ts.isStringLiteral(e) || ts.isNoSubstitutionTemplateLiteral(e)) return [e.text];
  if (ts.isParenthesizedExpression(e) || ts.isSatisfiesExpression(e) || ts.isAsExpression(e))
    return literals(e.expression);
  if (ts.isConditionalExpression(e)) return [...literals(e.whenTrue), ...literals(e.whenFalse)];
  return [];
}

const RAISERS = new Set(['fatal', 'transient', 'JobFailure']);
const TYPE_PROPS = new Set(['crashType', 'failureType']);

/** What a function returns, for the functions whose declared return type is a failure type. */
function returned(fn: ts.SignatureDeclaration & { body?: ts.Node }): ts.Expression[] {
  if (!fn.body) return [];
  if (!ts.isBlock(fn.body)) return [fn.body as ts.Expression];
  const out: ts.Expression[] = [];
  const walk = (n: ts.Node): void => {
    if (ts.isFunctionLike(n)) return;
    if (ts.isReturnStatement(n) && n.expression) out.push(n.expression);
    n.forEachChild(walk);
  };
  fn.body.forEachChild(walk);
  return out;
}

interface Site {
  type: string;
  where: string;
}

/**
 * Every failure type written where src/ raises one: the first argument of fatal / transient /
 * new JobFailure, `type:` of ApplicationFailure.create, a job's crashType and failureType hook,
 * and what a function typed to return a failure type returns.
 */
function raisedTypes(): { sites: Site[]; creates: string[] } {
  const sites: Site[] = [];
  const creates: string[] = [];
  for (const file of sourceFiles(SRC)) {
    if (file.endsWith('/failures.ts')) continue;
    const text = readFileSync(file, 'utf8');
    const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
    const rel = relative(SRC, file);
    const add = (e: ts.Expression | undefined, node: ts.Node) => {
      for (const type of literals(e))
        sites.push({ type, where: `${rel}:${sf.getLineAndCharacterOfPosition(node.getStart()).line + 1}` });
    };
    const visit = (n: ts.Node): void => {
      if (
        (ts.isCallExpression(n) || ts.isNewExpression(n)) &&
        ts.isIdentifier(n.expression) &&
        RAISERS.has(n.expression.text)
      )
        add(n.arguments?.[0], n);
      if (ts.isCallExpression(n) && n.expression.getText(sf).startsWith('ApplicationFailure.')) {
        creates.push(`${rel}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}`);
        const arg = n.arguments[0];
        if (arg && ts.isObjectLiteralExpression(arg)) {
          for (const p of arg.properties)
            if (ts.isPropertyAssignment(p) && p.name.getText(sf) === 'type') add(p.initializer, p);
        }
      }
      if (ts.isPropertyAssignment(n) && TYPE_PROPS.has(n.name.getText(sf))) {
        const v = n.initializer;
        if (ts.isArrowFunction(v) || ts.isFunctionExpression(v)) for (const r of returned(v)) add(r, r);
        else add(v, n);
      }
      if (ts.isFunctionLike(n) && n.type && /\b(Fatal|Transient|Failure)Type\b/.test(n.type.getText(sf))) {
        for (const r of returned(n as ts.SignatureDeclaration & { body?: ts.Node })) {
          if (ts.isObjectLiteralExpression(r)) {
            for (const p of r.properties)
              if (ts.isPropertyAssignment(p) && p.name.getText(sf) === 'type') add(p.initializer, p);
          } else add(r, r);
        }
      }
      n.forEachChild(visit);
    };
    visit(sf);
  }
  return { sites, creates };
}

/** The `name` each Error subclass in src/ gives itself: an error escaping an activity reaches Temporal with it as its type. */
function errorNames(): Site[] {
  const out: Site[] = [];
  for (const file of sourceFiles(SRC)) {
    const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (n: ts.Node): void => {
      const own = ts.isPropertyDeclaration(n) && n.name.getText(sf) === 'name' ? n.initializer : undefined;
      const set =
        ts.isBinaryExpression(n) &&
        n.operatorToken.kind === ts.SyntaxKind.EqualsToken &&
        n.left.getText(sf) === 'this.name'
          ? n.right
          : undefined;
      for (const type of literals(own ?? set))
        out.push({ type, where: `${relative(SRC, file)}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}` });
      n.forEachChild(visit);
    };
    visit(sf);
  }
  return out;
}

describe('src/failures.ts, the one list of failure types', () => {
  const { sites, creates } = raisedTypes();
  const raised = new Set(sites.map((s) => s.type));

  it('declares every type src/ raises', () => {
    expect(sites.filter((s) => !(s.type in FAILURES)).map((s) => `${s.where}: '${s.type}'`)).toEqual([]);
  });

  it('has every declared type raised somewhere, or says why not', () => {
    expect(declared.filter((t) => !raised.has(t) && !kinds[t].notRaised)).toEqual([]);
    expect(declared.filter((t) => raised.has(t) && kinds[t].notRaised)).toEqual([]);
  });

  it('finds the raising sites it looks for (the scan is not vacuous)', () => {
    expect(raised.size).toBeGreaterThan(20);
    for (const t of [
      'ServerCrashed',
      'SmokeTestFailed',
      'DiskFull',
      'TrainerFailed',
      'ExportFailed',
      'ExtractCrashed',
      'StageFailed',
    ] as const)
      expect(raised).toContain(t);
  });

  it('creates ApplicationFailures only through the activities helpers and the workflow end', () => {
    expect(creates.map((c) => c.split(':')[0]).sort()).toEqual([
      'activities/context.ts',
      'activities/context.ts',
      'workflows/pipeline.ts',
    ]);
  });

  it('lets no Error class take a declared type by its name, but ConfigError, which means the same', () => {
    const names = errorNames();
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((n) => n.type in FAILURES).map((n) => `${n.where.split(':')[0]}: ${n.type}`)).toEqual([
      'config/load.ts: ConfigError',
    ]);
  });

  it('keeps NON_RETRYABLE, part of every scheduled activity retry policy, exactly as recorded histories have it', () => {
    const recorded = [
      'ConfigError',
      'PreflightFailed',
      'MissingDependencyError',
      'PortInUseError',
      'DrafterRejectedError',
      'OutOfMemoryError',
      'DataIncomplete',
      'ServerNotReady',
      'ServerMismatch',
      'ServerStartFailed',
    ];
    expect(NON_RETRYABLE).toEqual(recorded);
    expect(POLICY).toBe(NON_RETRYABLE);
  });

  it('derives NON_RETRYABLE and SERVER_RELAUNCHABLE from the list', () => {
    expect(NON_RETRYABLE).toEqual(declared.filter((t) => kinds[t].inRetryPolicy));
    expect([...SERVER_RELAUNCHABLE]).toEqual(declared.filter((t) => kinds[t].relaunch));
    expect([...SERVER_RELAUNCHABLE]).toEqual(['ServerCrashed', 'SmokeTestFailed']);
    expect(READINESS_RELAUNCHABLE).toBe(SERVER_RELAUNCHABLE);
  });

  it('gives each type a consistent kind and a fix a researcher can act on', () => {
    for (const t of declared) {
      const k = kinds[t];
      // A person is needed exactly where nothing tries again on its own (StageFailed is the run's end, not a cause).
      if (t !== 'StageFailed')
        expect({ t, operator: k.operator }).toEqual({ t, operator: k.retry === 'never' && !k.relaunch });
      if (k.relaunch) expect({ t, retry: k.retry }).toEqual({ t, retry: 'never' });
      if (k.inRetryPolicy) expect({ t, retry: k.retry }).toEqual({ t, retry: 'never' });
      expect(k.fix.length, t).toBeGreaterThan(10);
      expect(k.fix, t).not.toMatch(/\n/);
    }
  });
});
