/**
 * No source file over 400 lines without a stated reason (issue 14): a file a newcomer must
 * read at once stays readable at once. The reason is a line starting `long-file:` in a
 * comment among the file's first 15 lines, so whoever opens it reads why before the rest.
 * Counted over what git tracks, as formatted (npm test runs prettier's check first).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const LIMIT = 400;
/** aerie's own code: the product, its simulator, scripts and benchmarks. Tests and fixtures are not held to it. */
const CODE = /^(src|sim|bench|bin|scripts|py)\/.*\.(ts|mts|mjs|py|sh)$/;

function trackedCode(): string[] {
  const out = execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' });
  return out.split('\0').filter((p) => CODE.test(p));
}

function lines(text: string): number {
  return text.endsWith('\n') ? text.split('\n').length - 1 : text.split('\n').length;
}

const statesReason = (text: string) =>
  text
    .split('\n')
    .slice(0, 15)
    .some((l) => /^\s*(\/\/|\*|#|\/\*\*?)\s*long-file:\s*\S/.test(l));

describe('file size', () => {
  it(`every code file is at most ${LIMIT} lines or says why in a long-file: line`, () => {
    const files = trackedCode();
    expect(files.length).toBeGreaterThan(100);
    const over = files
      .map((p) => ({ p, text: readFileSync(join(ROOT, p), 'utf8') }))
      .filter(({ text }) => lines(text) > LIMIT && !statesReason(text))
      .map(({ p, text }) => `${p}: ${lines(text)} lines`);
    expect(over, 'split the file by concern, or state the reason in a `long-file:` comment line').toEqual([]);
  });

  it('recognises a stated reason only near the top', () => {
    expect(statesReason('/**\n * long-file: one parser table\n */\n')).toBe(true);
    expect(statesReason('# long-file: stdlib only, one module shipped whole\n')).toBe(true);
    expect(statesReason(`${'x\n'.repeat(20)}// long-file: too late\n`)).toBe(false);
    expect(statesReason('// long-file:\n')).toBe(false);
  });
});
