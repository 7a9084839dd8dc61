/**
 * One sample regenerated: every assistant turn re-answered by the target through
 * /v1/chat/completions, and the row that records the outcome. Shared by the one-server stage
 * (regenerate.ts) and a pool's batches (pool-batch.ts), so both write the same rows.
 */
import type { Turn } from '../common/index.js';
import { postJson, ServerUnreachableError, withRetries } from '../common/index.js';
import type { GenerateJob } from './job.js';
import { regenerateTurns, type ConversationRow, type PlanEntry, type Status } from './plan.js';

export type Regenerate = Extract<PlanEntry, { action: 'regenerate' }>;
export type RecordRow = (kind: Status, lineNo: number, row: unknown) => Promise<void>;
export type ChatJob = Pick<
  GenerateJob,
  'baseUrl' | 'model' | 'temperature' | 'maxTokens' | 'retries' | 'requestTimeoutMs'
>;

async function chatAnswer(job: ChatJob, conversation: Turn[], signal: AbortSignal): Promise<Turn> {
  const body = {
    model: job.model,
    messages: conversation.map((t) => ({ role: t.role, content: t.content })),
    temperature: job.temperature,
    max_tokens: job.maxTokens,
    stream: false,
  };
  const res = (await postJson(`${job.baseUrl}/v1/chat/completions`, body, {
    signal,
    timeoutMs: job.requestTimeoutMs ?? 600_000,
  })) as { choices?: { message?: { content?: string | null; reasoning_content?: string | null } }[] };
  const msg = res?.choices?.[0]?.message;
  if (!msg) throw new Error('answer has no choices[0].message');
  const turn: Turn = { role: 'assistant', content: typeof msg.content === 'string' ? msg.content : '' };
  if (typeof msg.reasoning_content === 'string' && msg.reasoning_content !== '') {
    turn.reasoning_content = msg.reasoning_content;
  }
  return turn;
}

/**
 * Regenerates one sample and records its row. An aborted sample records nothing (the resume
 * redoes it); a server nobody can reach is not the sample's fault: it throws, recording nothing.
 */
export async function regenerateSample(
  job: ChatJob,
  e: Regenerate,
  signal: AbortSignal,
  record: RecordRow,
): Promise<void> {
  let turns: Turn[];
  try {
    turns = await regenerateTurns(e.sample.turns, (soFar) =>
      withRetries(() => chatAnswer(job, soFar, signal), { retries: job.retries, signal }),
    );
  } catch (err) {
    if (signal.aborted) return;
    if (err instanceof ServerUnreachableError) throw err;
    const error = (err as Error)?.message ?? String(err);
    await record('error', e.lineNo, {
      id: e.sample.id,
      conversations: e.sample.turns,
      status: 'error',
      error,
    } satisfies ConversationRow);
    return;
  }
  // An empty answer fails SpecForge's validator (SpecForge@a6b6b023:scripts/conversation_validation.py:30-36),
  // so it is skipped, as SpecForge's own regenerator does under --reasoning disable (regenerate_train_data.py:287-296).
  const empty = turns.findIndex((t) => t.role === 'assistant' && t.content.trim() === '');
  if (empty >= 0) {
    await record('skipped', e.lineNo, {
      id: e.sample.id,
      conversations: e.sample.turns,
      status: 'skipped',
      error: `the target's answer at turn ${empty + 1} is empty`,
    } satisfies ConversationRow);
    return;
  }
  await record('ok', e.lineNo, { id: e.sample.id, conversations: turns, status: 'success' } satisfies ConversationRow);
}
