/**
 * What regeneration will do with each input line, decided before any request is sent:
 * regenerate it, skip it (nothing to answer), count it as an error (an id that cannot be a
 * file name), or reject it (malformed, duplicate id). Pure, so resume decisions are testable.
 */
import { hasUserTurn, parseSampleLine, unsafeIdReason, type Sample, type Turn } from './conversations.js';
import type { NumberedLine } from './jsonl.js';

export type PlanEntry =
  | { action: 'regenerate'; lineNo: number; sample: Sample }
  | { action: 'skip'; lineNo: number; sample: Sample; reason: string }
  | { action: 'error'; lineNo: number; sample: Sample; error: string }
  | { action: 'reject'; lineNo: number; id?: string; reason: string; text: string };

/** Longest raw line kept in a reject row: enough to find and fix it, not a copy of the data. */
const REJECT_TEXT_MAX = 1000;

export function planGenerate(lines: readonly NumberedLine[]): PlanEntry[] {
  const seen = new Map<string, number>();
  const plan: PlanEntry[] = [];
  for (const { lineNo, text } of lines) {
    const parsed = parseSampleLine(text);
    const raw = text.length > REJECT_TEXT_MAX ? text.slice(0, REJECT_TEXT_MAX) + '…' : text;
    if (!parsed.ok) {
      plan.push({ action: 'reject', lineNo, reason: parsed.reason, text: raw });
      continue;
    }
    const { sample } = parsed;
    const first = seen.get(sample.id);
    if (first !== undefined) {
      plan.push({ action: 'reject', lineNo, id: sample.id, reason: 'duplicate id', text: raw });
      continue;
    }
    seen.set(sample.id, lineNo);
    const unsafe = unsafeIdReason(sample.id);
    if (unsafe) plan.push({ action: 'error', lineNo, sample, error: unsafe });
    else if (!hasUserTurn(sample)) plan.push({ action: 'skip', lineNo, sample, reason: 'no user turn' });
    else plan.push({ action: 'regenerate', lineNo, sample });
  }
  return plan;
}

export type Status = 'ok' | 'error' | 'skipped' | 'rejected';

/** A SpecForge conversations row, tagged like SpecForge's regeneration output. */
export interface ConversationRow {
  id: string;
  conversations: Turn[];
  status: 'ok' | 'error' | 'skipped';
  error?: string;
  reason?: string;
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
