/**
 * What regeneration will do with each input line, decided before any request is sent:
 * regenerate it, skip it (nothing to answer), count it as an error (an id that cannot be a
 * file name), or reject it (malformed, duplicate id). Pure, so resume decisions are testable.
 */
import { hasUserTurn, parseSampleLine, unsafeIdReason, type Sample, type Turn } from '../common/index.js';
import type { NumberedLine } from '../common/index.js';

export type PlanEntry =
  | { action: 'regenerate'; lineNo: number; sample: Sample }
  | { action: 'skip'; lineNo: number; sample: Sample; reason: string }
  | { action: 'error'; lineNo: number; sample: Sample; error: string }
  | { action: 'reject'; lineNo: number; id?: string; reason: string; text: string };

/** Longest raw line kept in a reject row: enough to find and fix it, not a copy of the data. */
const REJECT_TEXT_MAX = 1000;

/**
 * Plans one line at a time, remembering only the ids seen so far (for duplicates): what a
 * streamed input needs. planGenerate over the same lines gives the same entries.
 */
export class LinePlanner {
  private readonly seen = new Set<string>();

  plan({ lineNo, text }: NumberedLine): PlanEntry {
    const parsed = parseSampleLine(text);
    const raw = text.length > REJECT_TEXT_MAX ? text.slice(0, REJECT_TEXT_MAX) + '…' : text;
    if (!parsed.ok) return { action: 'reject', lineNo, reason: parsed.reason, text: raw };
    const { sample } = parsed;
    if (this.seen.has(sample.id)) return { action: 'reject', lineNo, id: sample.id, reason: 'duplicate id', text: raw };
    this.seen.add(sample.id);
    const unsafe = unsafeIdReason(sample.id);
    if (unsafe) return { action: 'error', lineNo, sample, error: unsafe };
    if (!hasUserTurn(sample)) return { action: 'skip', lineNo, sample, reason: 'no user turn' };
    return { action: 'regenerate', lineNo, sample };
  }
}

export function planGenerate(lines: readonly NumberedLine[]): PlanEntry[] {
  const planner = new LinePlanner();
  return lines.map((l) => planner.plan(l));
}

export type Status = 'ok' | 'error' | 'skipped' | 'rejected';

/**
 * A conversations row with SpecForge's own regeneration tags, so its validator accepts aerie's
 * train.jsonl: `status: "success"` (SpecForge@a6b6b023:scripts/regenerate_train_data.py:334),
 * and a skipped or failed row says why in `error` (ibid. :67-72 set_skipped, :266-267 errors);
 * scripts/validate_regenerated_data.py:72-73 rejects any row whose status is not "success".
 */
export interface ConversationRow {
  id: string;
  conversations: Turn[];
  status: 'success' | 'error' | 'skipped';
  error?: string;
}

/**
 * A row's text as SpecForge tags it. Shards from before aerie used SpecForge's tags hold
 * `status: "ok"` and skipped rows with `reason`; a resumed run merges them, so they are
 * rewritten on the way out rather than left to fail SpecForge's validator. Anything else is
 * returned unchanged, byte for byte.
 */
export function specforgeRowText(text: string): string {
  // aerie wrote status last ({"id":…,"conversations":[…],"status":"ok"}): the common case without a parse.
  if (text.endsWith(',"status":"ok"}')) return `${text.slice(0, -'"ok"}'.length)}"success"}`;
  if (!text.includes('"status":"ok"') && !text.includes('"reason":')) return text;
  const row = JSON.parse(text) as Record<string, unknown>;
  let changed = false;
  if (row.status === 'ok') [row.status, changed] = ['success', true];
  if (row.status === 'skipped' && typeof row.reason === 'string' && row.error === undefined) {
    row.error = row.reason;
    delete row.reason;
    changed = true;
  }
  return changed ? JSON.stringify(row) : text;
}

export interface RejectRow {
  line: number;
  id?: string;
  status: 'rejected';
  reason: string;
  text: string;
}

export function rejectRow(e: Extract<PlanEntry, { action: 'reject' }>): RejectRow {
  const row: RejectRow = { line: e.lineNo, status: 'rejected', reason: e.reason, text: e.text };
  if (e.id !== undefined) row.id = e.id;
  return row;
}

/**
 * The regeneration order for one sample: every assistant turn is re-answered by the target
 * from the conversation so far (system and user turns kept verbatim); a conversation that
 * ends on a user turn gets one more answer, so every question has the target's reply.
 * Assistant turns before the first user turn have nothing to answer and are dropped.
 */
export async function regenerateTurns(
  turns: readonly Turn[],
  answer: (conversationSoFar: Turn[]) => Promise<Turn>,
): Promise<Turn[]> {
  const out: Turn[] = [];
  let sawUser = false;
  for (const t of turns) {
    if (t.role !== 'assistant') {
      out.push({ role: t.role, content: t.content });
      if (t.role === 'user') sawUser = true;
      continue;
    }
    if (!sawUser) continue;
    out.push(await answer(out.slice()));
  }
  if (out.length > 0 && out[out.length - 1].role === 'user') out.push(await answer(out.slice()));
  return out;
}
