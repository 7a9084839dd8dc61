/**
 * Runs aerie's host-side tokenizer (py/aerie_hs/tokens.py) as the GPU host would: `python -m
 * aerie_hs.tokens` with conversations on stdin, in a Python that has transformers. Also reads
 * the real-SpecForge fixture its output must equal.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AERIE_HOME } from '../../src/config/load.js';

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
export function runTokens(python: string, args: string[], stdin: string, extraPath: string[] = []): Promise<TokensRun> {
  return new Promise((resolve, reject) => {
    const env = {
      ...process.env,
      PYTHONPATH: [...extraPath, join(AERIE_HOME, 'py')].join(':'),
      PYTHONDONTWRITEBYTECODE: '1',
      HF_HUB_OFFLINE: '1',
    };
    const child = spawn(python, ['-m', 'aerie_hs.tokens', ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => {
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
      resolve({ code, stdout, stderr, lines, summary });
    });
    child.stdin.end(stdin);
  });
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
