/**
 * Training conversations: parse one jsonl line (SpecForge or ShareGPT) into a normalized
 * sample, check that its id is safe to become a file name, and render it as the prefill
 * text for hidden-state extraction. Pure functions only.
 */

export type Role = 'system' | 'user' | 'assistant';

export interface Turn {
  role: Role;
  content: string;
  /** Separate reasoning text, when the source (or the target's answer) carries one. */
  reasoning_content?: string;
}

export interface Sample {
  id: string;
  turns: Turn[];
}

export type ParsedLine = { ok: true; sample: Sample } | { ok: false; reason: string };

const SHAREGPT_ROLES: Record<string, Role> = {
  human: 'user',
  user: 'user',
  gpt: 'assistant',
  chatgpt: 'assistant',
  assistant: 'assistant',
  system: 'system',
};

const SPECFORGE_ROLES = new Set<string>(['system', 'user', 'assistant']);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Ids may be strings or integers in the wild (ShareGPT dumps often number them). */
function readId(obj: Record<string, unknown>): string | { reason: string } {
  const id = obj.id;
  if (id === undefined || id === null || id === '') return { reason: 'no id' };
  if (typeof id === 'string') return id;
  if (typeof id === 'number' && Number.isSafeInteger(id)) return String(id);
  return { reason: `id is not a string (${typeof id})` };
}

function parseTurn(raw: unknown, n: number): Turn | { reason: string } {
  if (!isRecord(raw)) return { reason: `turn ${n}: not an object` };
  if (typeof raw.role === 'string') {
    if (!SPECFORGE_ROLES.has(raw.role)) return { reason: `turn ${n}: unknown role "${raw.role}"` };
    if (typeof raw.content !== 'string') return { reason: `turn ${n}: content is not a string` };
    if (raw.role !== 'assistant' && raw.content.trim() === '')
      return { reason: `turn ${n}: empty ${raw.role} content` };
    const turn: Turn = { role: raw.role as Role, content: raw.content };
    if (typeof raw.reasoning_content === 'string' && raw.reasoning_content !== '') {
      turn.reasoning_content = raw.reasoning_content;
    }
    return turn;
  }
  if (typeof raw.from === 'string') {
    const role = SHAREGPT_ROLES[raw.from];
    if (!role) return { reason: `turn ${n}: unknown role "${raw.from}"` };
    if (typeof raw.value !== 'string') return { reason: `turn ${n}: value is not a string` };
    if (role !== 'assistant' && raw.value.trim() === '') return { reason: `turn ${n}: empty ${role} content` };
    return { role, content: raw.value };
  }
  return { reason: `turn ${n}: no role (neither "role" nor "from")` };
}

/**
 * One jsonl line → a sample, or the reason it cannot be one. Turn numbers in reasons are 1-based.
 * An empty system or user turn is malformed (there is nothing to answer or to condition on);
 * an empty assistant turn is fine, since regeneration replaces it.
 */
export function parseSampleLine(line: string): ParsedLine {
  let obj: unknown;
  try {
    obj = JSON.parse(line);
  } catch (err) {
    return { ok: false, reason: `bad JSON: ${(err as Error).message}` };
  }
  if (!isRecord(obj)) return { ok: false, reason: 'not a JSON object' };
  const id = readId(obj);
  if (typeof id !== 'string') return { ok: false, reason: id.reason };
  const convs = obj.conversations;
  if (convs === undefined || convs === null) return { ok: false, reason: 'no conversations' };
  if (!Array.isArray(convs)) return { ok: false, reason: 'conversations is not an array' };
  if (convs.length === 0) return { ok: false, reason: 'no conversations (empty list)' };
  const turns: Turn[] = [];
  for (let i = 0; i < convs.length; i++) {
    const t = parseTurn(convs[i], i + 1);
    if ('reason' in t) return { ok: false, reason: t.reason };
    turns.push(t);
  }
  return { ok: true, sample: { id, turns } };
}

export function hasUserTurn(sample: Sample): boolean {
  return sample.turns.some((t) => t.role === 'user');
}

const MAX_ID_LENGTH = 200;

/**
 * Sample ids become file names (`<id>.hs` in the dump and output dirs), so an id that could
 * escape its directory or confuse a shell-free path join is refused. Returns null when safe.
 */
export function unsafeIdReason(id: string): string | null {
  if (id.length === 0) return 'unsafe id: empty';
  if (id.length > MAX_ID_LENGTH) return `unsafe id: longer than ${MAX_ID_LENGTH} characters`;
  if (id.includes('/') || id.includes('\\')) return 'unsafe id: contains a path separator';
  if (id.includes('..')) return 'unsafe id: contains ".."';
  if (id.startsWith('.')) return 'unsafe id: starts with "."';
  // eslint-disable-next-line no-control-regex
  if (/[\x00-\x1f\x7f]/.test(id)) return 'unsafe id: contains a control character';
  return null;
}

/**
 * The prefill text for extraction: each turn as `<|role|>\n<content>\n`, in order, with an
 * assistant's reasoning (when present) inside `<think>…</think>` before its answer.
 * This is aerie's own neutral rendering, not the target's chat template: the hidden states
 * are of exactly this text, and the trainer must tokenize the same rendering.
 */
export function renderForExtraction(sample: Sample): string {
  let out = '';
  for (const t of sample.turns) {
    out += `<|${t.role}|>\n`;
    if (t.role === 'assistant' && t.reasoning_content) out += `<think>\n${t.reasoning_content}\n</think>\n`;
    out += `${t.content}\n`;
  }
  return out;
}

/** Whitespace word count: the cheap token estimate used for disk planning. */
export function estimateTokens(text: string): number {
  const words = text.split(/\s+/).filter((w) => w.length > 0);
  return words.length;
}
