/**
 * Runs aerie's host-side tokenizer (py/aerie_hs/tokens.py) as the GPU host would: `python -m
 * aerie_hs.tokens` with conversations on stdin, in a Python that has transformers. Also reads
 * the real-SpecForge fixture its output must equal.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AERIE_HOME } from '../../src/config/load.js';
import { python as runPython } from '../support/python.js';

export const FIXTURE = join(AERIE_HOME, 'test', 'fixtures', 'real', 'specforge-pypi-0.2.0');
export const TOKENIZER = join(FIXTURE, 'tokenizer');

export interface FixtureCase {
  id: string | number;
  max_length: number;
  conversations: unknown[];
}
export interface Expected {
  id: string;
  max_length: number;
  input_ids: number[];
  loss_mask: number[];
}

export const CASES: FixtureCase[] = readFileSync(join(FIXTURE, 'cases.jsonl'), 'utf8')
  .trim()
  .split('\n')
  .map((l) => JSON.parse(l) as FixtureCase);
export const EXPECTED = (JSON.parse(readFileSync(join(FIXTURE, 'expected.json'), 'utf8')) as { cases: Expected[] })
  .cases;

export interface TokensRun {
  code: number | null;
  stdout: string;
  stderr: string;
  lines: Record<string, unknown>[];
  summary: Record<string, unknown> | undefined;
}

/** extraPath goes before aerie's py/ on PYTHONPATH (a stand-in `specforge`, say). */
export async function runTokens(
  python: string,
  args: string[],
  stdin: string,
  extraPath: string[] = [],
): Promise<TokensRun> {
  const { code, stdout, stderr } = await runPython(['-m', 'aerie_hs.tokens', ...args], {
    python,
    extraPath,
    input: stdin,
    env: { PYTHONDONTWRITEBYTECODE: '1', HF_HUB_OFFLINE: '1' },
  });
  const lines = stdout
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  const last = stderr.trim().split('\n').pop() ?? '';
  let summary: Record<string, unknown> | undefined;
  try {
    summary = (JSON.parse(last) as { aerie_tokens?: Record<string, unknown> }).aerie_tokens;
  } catch {
    summary = undefined;
  }
  return { code, stdout, stderr, lines, summary };
}

export function jsonl(rows: unknown[]): string {
  return rows.map((r) => JSON.stringify(r)).join('\n') + '\n';
}

/** The fixture's cases for one max_length, as tokens.py reads them. */
export function casesAt(maxLength: number): string {
  return jsonl(
    CASES.filter((c) => c.max_length === maxLength).map((c) => ({ id: c.id, conversations: c.conversations })),
  );
}

export const MAX_LENGTHS = [...new Set(CASES.map((c) => c.max_length))];
