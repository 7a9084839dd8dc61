/**
 * The OpenAI-compatible routes: /v1/chat/completions and /v1/completions, with SGLang's
 * stream order (role chunk, content deltas, a finish_reason chunk, an optional usage chunk
 * with `choices: []`, then `data: [DONE]`).
 */
import { randomUUID } from 'node:crypto';
import type { FinishReason, GenRequest, ReqState } from './engine.js';
import { type Exchange, HttpError, OpenAIError, openaiErrorBody, sendJson, sseData, startSse } from './http.js';
import { checkLength } from './api-native.js';
import { openaiStreamErrorInBand } from './profile.js';
import { SamplingError, type SamplingParams, parseSamplingParams } from './sampling.js';
import { type ChatMessage, renderChat, seedKey } from './text.js';

type Body = Record<string, unknown>;

/**
 * A request pydantic refuses: FastAPI's RequestValidationError, answered 400 with type "Bad Request"
 * (HTTPStatus.BAD_REQUEST.phrase) in every release (sglang==0.5.4:srt/entrypoints/http_server.py:348-381;
 * sglang==0.5.23:srt/entrypoints/http_server.py:635-690).
 */
function openaiError(message: string): OpenAIError {
  return new OpenAIError(400, message, 'Bad Request');
}

/**
 * A ValueError while serving (context length, sampling parameters): create_error_response's default
 * type "BadRequestError" (sglang==0.5.4:srt/entrypoints/openai/serving_chat.py:675-676;
 * sglang==0.5.23:srt/entrypoints/openai/serving_chat.py:2818-2819).
 */
function servingError(e: unknown): unknown {
  if (e instanceof HttpError && !(e instanceof OpenAIError))
    return new OpenAIError(e.status, e.message, 'BadRequestError');
  return e;
}

function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content
      .map((part) =>
        part && typeof part === 'object' && (part as Body).type === 'text' ? String((part as Body).text ?? '') : '',
      )
      .join(' ');
  }
  if (content === null || content === undefined) return '';
  throw openaiError('messages: content must be a string or a list of content parts');
}

export function chatMessages(body: Body): ChatMessage[] {
  const raw = body.messages;
  if (!Array.isArray(raw) || raw.length === 0)
    throw openaiError('1 validation error for ChatCompletionRequest\nmessages\n  Field required');
  return raw.map((m, i) => {
    if (!m || typeof m !== 'object' || typeof (m as Body).role !== 'string') {
      throw openaiError(`messages.${i}: each message needs a string role`);
    }
    return { role: (m as Body).role as string, content: contentText((m as Body).content) };
  });
}

/** OpenAI request fields → SGLang sampling params (SGLang's own extras pass through; the vLLM profile maps its requests the same way). */
export function samplingFrom(body: Body, defaultMax: number | null): SamplingParams {
  const p: Body = {};
  const copy = (from: string, to = from) => {
    if (body[from] !== undefined && body[from] !== null) p[to] = body[from];
  };
  copy('max_tokens', 'max_new_tokens');
  copy('max_completion_tokens', 'max_new_tokens');
  copy('min_tokens', 'min_new_tokens');
  copy('seed', 'sampling_seed');
  for (const k of [
    'temperature',
    'top_p',
    'top_k',
    'min_p',
    'frequency_penalty',
    'presence_penalty',
    'repetition_penalty',
    'stop',
    'stop_token_ids',
    'ignore_eos',
    'skip_special_tokens',
    'no_stop_trim',
    'n',
  ])
    copy(k);
  try {
    return parseSamplingParams(p, defaultMax);
  } catch (e) {
    if (e instanceof SamplingError) throw new OpenAIError(400, e.message, 'BadRequestError');
    throw e;
  }
}

function finishName(f: FinishReason | null): string | null {
  if (!f) return null;
  return f.type === 'length' ? 'length' : f.type === 'abort' ? 'abort' : 'stop';
}

function matchedStop(f: FinishReason | null): number | string | null {
  return f && f.type === 'stop' ? f.matched : null;
}

function usage(states: ReqState[]) {
  const prompt = states[0]?.req.promptTokens ?? 0;
  const completion = states.reduce((s, r) => s + r.outputIds.length, 0);
  return {
    prompt_tokens: prompt,
    total_tokens: prompt + completion,
    completion_tokens: completion,
    prompt_tokens_details: null,
    reasoning_tokens: 0,
  };
}

interface Plan {
  prompt: string;
  /** The prompt's ids as the server tokenizes it: usage.prompt_tokens is their count. */
  ids: number[];
  params: SamplingParams;
}

async function run(x: Exchange, body: Body, plan: Plan, chat: boolean): Promise<void> {
  const { ctx } = x;
  const id = randomUUID().replace(/-/g, '');
  const created = Math.floor(Date.now() / 1000);
  const model = typeof body.model === 'string' ? body.model : ctx.resolved.args.served_model_name;
  const object = chat ? 'chat.completion' : 'text_completion';
  const chunkObject = chat ? 'chat.completion.chunk' : 'text_completion';
  const streaming = Boolean(body.stream);
  const promptTokens = Math.max(1, plan.ids.length);
  const maxNew = plan.params.max_new_tokens ?? ctx.resolved.contextLen - promptTokens - 1;
  const base = (): Omit<GenRequest, 'rid' | 'key'> => ({
    promptTokens,
    promptUnits: plan.ids.map(String),
    params: { ...plan.params, max_new_tokens: maxNew },
    kind: 'real',
    context: plan.ids,
    bareFirst: true,
  });
  const states: ReqState[] = [];
  const sentText: string[] = [];
  if (streaming) startSse(x);
  const chunk = (choices: unknown[], extra: Body = {}) => ({
    id,
    object: chunkObject,
    created,
    model,
    choices,
    ...extra,
  });
  for (let i = 0; i < plan.params.n; i++) {
    const req: GenRequest = {
      ...base(),
      rid: `${id}${plan.params.n > 1 ? `_${i}` : ''}`,
      key: seedKey(plan.prompt, plan.params.sampling_seed, i),
    };
    sentText.push('');
    if (streaming) {
      if (chat)
        sseData(
          x,
          chunk(
            [
              {
                index: i,
                delta: { role: 'assistant', content: '' },
                logprobs: null,
                finish_reason: null,
                matched_stop: null,
              },
            ],
            { usage: null },
          ),
        );
      req.onProgress = (r) => {
        const delta = r.text.slice(sentText[i].length);
        if (delta === '') return;
        sentText[i] = r.text;
        const choice = chat
          ? {
              index: i,
              delta: { role: null, content: delta, reasoning_content: null, tool_calls: null },
              logprobs: null,
              finish_reason: null,
              matched_stop: null,
            }
          : { index: i, text: delta, logprobs: null, finish_reason: null, matched_stop: null };
        sseData(x, chunk([choice], { usage: null }));
      };
    }
    states.push(ctx.engine.submit(req));
  }
  x.res.on('close', () => {
    for (const s of states) if (!s.finishReason) ctx.engine.abort(s, 'The client disconnected.');
  });
  await Promise.all(
    states.map(async (s, i) => {
      await s.done;
      if (!streaming) return;
      const choice = chat
        ? {
            index: i,
            delta: {},
            logprobs: null,
            finish_reason: finishName(s.finishReason),
            matched_stop: matchedStop(s.finishReason),
          }
        : {
            index: i,
            text: '',
            logprobs: null,
            finish_reason: finishName(s.finishReason),
            matched_stop: matchedStop(s.finishReason),
          };
      sseData(x, chunk([choice], { usage: null }));
    }),
  );
  if (streaming) {
    const opts = body.stream_options as Body | undefined;
    if (opts && opts.include_usage) sseData(x, chunk([], { usage: usage(states) }));
    sseData(x, '[DONE]');
    x.res.end();
    return;
  }
  const choices = states.map((s, i) =>
    chat
      ? {
          index: i,
          message: { role: 'assistant', content: s.text, reasoning_content: null, tool_calls: null },
          logprobs: null,
          finish_reason: finishName(s.finishReason),
          matched_stop: matchedStop(s.finishReason),
        }
      : {
          index: i,
          text: s.text,
          logprobs: null,
          finish_reason: finishName(s.finishReason),
          matched_stop: matchedStop(s.finishReason),
        },
  );
  sendJson(x, 200, {
    id,
    object,
    created,
    model,
    choices,
    usage: usage(states),
    metadata: { weight_version: ctx.resolved.args.weight_version },
  });
}

/**
 * A ValueError raised while a streamed request starts: in the stream, as `data: {"error": ...}`
 * then `data: [DONE]` with status 200, on 0.5.4 and 0.5.9 (sglang==0.5.4:srt/entrypoints/openai/serving_chat.py:434-445,657-662;
 * 0.5.9 :590-600,858-863); from 0.5.12 the first chunk is awaited before the response starts, so it
 * is a plain 400 (sglang==0.5.12:srt/entrypoints/openai/serving_chat.py:779-801; 0.5.23 :2413-2435).
 */
function refuseServing(x: Exchange, body: Body, e: unknown): void {
  const err = servingError(e);
  if (!(err instanceof OpenAIError) || !body.stream || !openaiStreamErrorInBand(x.ctx.env.release)) throw err;
  startSse(x);
  sseData(x, { error: openaiErrorBody(err.message, err.type, err.status) });
  sseData(x, '[DONE]');
  x.res.end();
}

export async function handleChat(x: Exchange): Promise<void> {
  const body = (x.body ?? {}) as Body;
  const messages = chatMessages(body);
  const prompt = renderChat(messages);
  const ids = x.ctx.lm.tok.encode(prompt, false);
  let params: SamplingParams;
  try {
    params = samplingFrom(body, null);
    checkLength(x.ctx, ids.length, params.max_new_tokens);
  } catch (e) {
    return refuseServing(x, body, e);
  }
  await run(x, body, { prompt, ids, params }, true);
}

export async function handleCompletion(x: Exchange): Promise<void> {
  const body = (x.body ?? {}) as Body;
  let prompt = body.prompt;
  if (Array.isArray(prompt)) {
    if (prompt.length !== 1)
      throw openaiError('The simulator serves one prompt per /v1/completions request; send a string prompt.');
    prompt = prompt[0];
  }
  if (typeof prompt !== 'string')
    throw openaiError('1 validation error for CompletionRequest\nprompt\n  Field required');
  // A completion prompt is tokenized as /generate's text is, BOS first.
  const ids = x.ctx.lm.tok.encode(prompt, true);
  let params: SamplingParams;
  try {
    params = samplingFrom(body, 16);
    checkLength(x.ctx, ids.length, params.max_new_tokens);
  } catch (e) {
    return refuseServing(x, body, e);
  }
  await run(x, body, { prompt, ids, params }, false);
}

/**
 * POST /tokenize and /v1/tokenize: the server's tokenizer on a prompt or a list of them,
 * special tokens (BOS) added unless add_special_tokens is false; max_model_len is the tokenizer's
 * model_max_length (8192 in the target's tokenizer_config.json). The same in 0.5.4-0.5.23 for these
 * fields (sglang==0.5.4:srt/entrypoints/openai/protocol.py:863-879, serving_tokenize.py:30-66,
 * http_server.py:1126-1141; sglang==0.5.23:srt/entrypoints/openai/protocol.py:1744-1762).
 */
export function handleTokenize(x: Exchange): void {
  const body = (x.body ?? {}) as Body;
  const special = body.add_special_tokens !== false;
  const enc = (t: unknown) => x.ctx.lm.tok.encode(String(t), special);
  const maxModelLen = 8192;
  if (typeof body.prompt === 'string') {
    const tokens = enc(body.prompt);
    return sendJson(x, 200, { tokens, count: tokens.length, max_model_len: maxModelLen });
  }
  if (Array.isArray(body.prompt)) {
    const tokens = body.prompt.map(enc);
    return sendJson(x, 200, { tokens, count: tokens.map((t) => t.length), max_model_len: maxModelLen });
  }
  throw openaiError('1 validation error for TokenizeRequest\nprompt\n  Field required');
}

/** POST /detokenize and /v1/detokenize (sglang==0.5.4:srt/entrypoints/openai/serving_tokenize.py:69-120). */
export function handleDetokenize(x: Exchange): void {
  const body = (x.body ?? {}) as Body;
  const skip = body.skip_special_tokens !== false;
  const t = body.tokens;
  if (!Array.isArray(t)) throw openaiError('1 validation error for DetokenizeRequest\ntokens\n  Field required');
  if (t.every((v) => typeof v === 'number'))
    return sendJson(x, 200, { text: x.ctx.lm.tok.decode(t as number[], skip) });
  return sendJson(x, 200, { text: t.map((row) => x.ctx.lm.tok.decode((row as number[]).map(Number), skip)) });
}
