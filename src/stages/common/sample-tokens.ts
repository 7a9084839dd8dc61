/**
 * The training tokens of each sample, as aerie's host-side tokenizer (py/aerie_hs/tokens.py)
 * makes them with the target's own tokenizer the way SpecForge's preprocessing does
 * (SpecForge@a6b6b023:specforge/data/parse.py:187-330): reading tokens.py's output lines and
 * its summary. Pure functions only.
 */

/** One sample's ids and mask: equal lengths, mask 0/1 (1 over each answer and its end of turn). */
export interface SampleTokens {
  id: string;
  inputIds: number[];
  lossMask: number[];
}

/**
 * One output line of tokens.py: the sample's tokens; an error for that sample (it keeps its
 * id); a line of its input that was no sample (no id to keep, only the line number); or an
 * output line aerie cannot read, which means the script or the link is broken.
 */
export type TokensLine =
  | { kind: 'tokens'; tokens: SampleTokens }
  | { kind: 'error'; id: string; error: string }
  | { kind: 'malformed'; line: number; error: string }
  | { kind: 'invalid'; reason: string };

export interface TokensSummary {
  lines: number;
  ok: number;
  errors: number;
  malformed: number;
  /** 'aerie+specforge' when SpecForge's own preprocessing ran beside aerie's and agreed. */
  method: 'aerie' | 'aerie+specforge';
  chatTemplate: string;
  maxLength: number;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function tokenIdsReason(v: unknown, what: string): string | null {
  if (!Array.isArray(v)) return `${what} is not a list`;
  for (let i = 0; i < v.length; i++) {
    const x: unknown = v[i];
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < 0)
      return `${what}[${i}] is not a token id (${JSON.stringify(x)})`;
  }
  return null;
}

export function parseTokensLine(text: string): TokensLine {
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch {
    return { kind: 'invalid', reason: `not JSON: ${text.slice(0, 120)}` };
  }
  if (!isRecord(obj)) return { kind: 'invalid', reason: 'not a JSON object' };
  if (obj.id === null) {
    if (
      typeof obj.line === 'number' &&
      Number.isSafeInteger(obj.line) &&
      obj.line > 0 &&
      typeof obj.error === 'string'
    ) {
      return { kind: 'malformed', line: obj.line, error: obj.error };
    }
    return { kind: 'invalid', reason: 'a line without an id has no line number and error' };
  }
  if (typeof obj.id !== 'string' || obj.id === '')
    return { kind: 'invalid', reason: `id is not a non-empty string (${JSON.stringify(obj.id)})` };
  const id = obj.id;
  if (typeof obj.error === 'string') return { kind: 'error', id, error: obj.error };
  const bad = tokenIdsReason(obj.input_ids, 'input_ids') ?? tokenIdsReason(obj.loss_mask, 'loss_mask');
  if (bad) return { kind: 'invalid', reason: `sample ${id}: ${bad}` };
  const inputIds = obj.input_ids as number[];
  const lossMask = obj.loss_mask as number[];
  if (inputIds.length === 0) return { kind: 'invalid', reason: `sample ${id}: no input_ids` };
  if (lossMask.length !== inputIds.length) {
    return {
      kind: 'invalid',
      reason: `sample ${id}: ${lossMask.length} loss_mask entries for ${inputIds.length} input_ids`,
    };
  }
  const notBit = lossMask.findIndex((m) => m !== 0 && m !== 1);
  if (notBit !== -1)
    return { kind: 'invalid', reason: `sample ${id}: loss_mask[${notBit}] is ${lossMask[notBit]}, not 0 or 1` };
  return { kind: 'tokens', tokens: { id, inputIds, lossMask } };
}

/** The summary tokens.py prints as the last line of its stderr, or null when there is none. */
export function parseTokensSummary(stderr: string): TokensSummary | null {
  const last = stderr.trim().split('\n').pop() ?? '';
  let obj: unknown;
  try {
    obj = JSON.parse(last);
  } catch {
    return null;
  }
  const s = isRecord(obj) && isRecord(obj.aerie_tokens) ? obj.aerie_tokens : null;
  if (!s) return null;
  const counts = ['lines', 'ok', 'errors', 'malformed'] as const;
  if (counts.some((k) => typeof s[k] !== 'number' || !Number.isSafeInteger(s[k]))) return null;
  if (s.method !== 'aerie' && s.method !== 'aerie+specforge') return null;
  if (typeof s.chat_template !== 'string' || typeof s.max_length !== 'number') return null;
  return {
    lines: s.lines as number,
    ok: s.ok as number,
    errors: s.errors as number,
    malformed: s.malformed as number,
    method: s.method,
    chatTemplate: s.chat_template,
    maxLength: s.max_length,
  };
}
