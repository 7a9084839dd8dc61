/**
 * POST /generate: SGLang's native API. Single or batched prompts (`text` list, `n`),
 * non-stream JSON or SSE (`output_ids` and `text` cumulative or deltas as the release streams
 * them), meta_info with the speculative counters on the finished output, prompt and cached
 * tokens in the target tokenizer's ids, and aerie's capture of every prefill when its plugin is installed.
 */
import { randomUUID } from 'node:crypto';
import type { GenRequest, ReqState, RequestKind } from './engine.js';
import { type Exchange, HttpError, WARMUP_HEADER, sendJson, sseData, startSse } from './http.js';
import type { ServerContext } from './http.js';
import { SamplingError, type SamplingParams, parseSamplingParams } from './sampling.js';
import { hiddenStatesMeta, hsRequestProblem, requestHsMode, serverHsMode } from './stock.js';
import { pseudoLogprob, seedKey } from './text.js';
import { refusesDuplicateRid, specMeta, streamDeltas } from './profile.js';

interface Prompt {
  text: string | null;
  ids: number[] | null;
}

export interface Prepared {
  req: GenRequest;
  /** Index in the response list (prompt-major, then n). */
  index: number;
}

/** Context-length checks, as TokenizerManager._validate_one_request words them. */
export function checkLength(ctx: ServerContext, promptTokens: number, maxNew: number | null): void {
  const ctxLen = ctx.resolved.contextLen;
  if (promptTokens >= ctxLen) {
    throw new HttpError(
      400,
      `The input (${promptTokens} tokens) is longer than the model's context length (${ctxLen} tokens).`,
    );
  }
  if (maxNew !== null && maxNew + promptTokens >= ctxLen) {
    throw new HttpError(
      400,
      `Requested token count exceeds the model's maximum context length of ${ctxLen} tokens. You requested a total of ` +
        `${maxNew + promptTokens} tokens: ${promptTokens} tokens from the input messages and ${maxNew} tokens for the completion. ` +
        'Please reduce the number of tokens in the input messages or the completion to fit within the limit.',
    );
  }
}

function prompts(body: Record<string, unknown>): { list: Prompt[]; batched: boolean } {
  const { text, input_ids: ids } = body;
  if ((text === undefined || text === null) && (ids === undefined || ids === null)) {
    throw new HttpError(400, 'Either text or input_ids should be provided.');
  }
  if (text !== undefined && text !== null && ids !== undefined && ids !== null) {
    throw new HttpError(400, 'Either text or input_ids should be provided.');
  }
  if (typeof text === 'string') return { list: [{ text, ids: null }], batched: false };
  if (Array.isArray(text)) return { list: text.map((t) => ({ text: String(t), ids: null })), batched: true };
  if (Array.isArray(ids)) {
    if (ids.every((v) => typeof v === 'number'))
      return { list: [{ text: null, ids: ids as number[] }], batched: false };
    return { list: ids.map((row) => ({ text: null, ids: (row as number[]).map(Number) })), batched: true };
  }
  throw new HttpError(400, 'text must be a string or a list of strings.');
}

/** Turn one /generate body into engine requests (validation errors become HTTP 400). */
export function prepareGenerate(x: Exchange): { items: Prepared[]; batched: boolean; body: Record<string, unknown> } {
  const { ctx } = x;
  const body = (x.body ?? {}) as Record<string, unknown>;
  if (typeof body !== 'object' || Array.isArray(body))
    throw new HttpError(400, 'The request body must be a JSON object.');
  const { list, batched: listBatched } = prompts(body);
  const rawParams = body.sampling_params;
  const hsMode = requestHsMode(body.return_hidden_states);
  if (hsMode !== null && hsMode !== 'last' && hsMode !== 'full') throw new HttpError(400, hsMode);
  const hsProblem = hsRequestProblem(
    hsMode,
    serverHsMode(ctx.resolved.args),
    ctx.resolved.args.return_hidden_states_mode,
  );
  if (hsProblem) throw new HttpError(400, hsProblem);
  const kind: RequestKind = x.req.headers[WARMUP_HEADER] ? 'warmup' : 'real';
  const items: Prepared[] = [];
  const dup = refusesDuplicateRid(ctx.env.release);
  const batchRids = new Set<string>();
  let nMax = 1;
  list.forEach((p, i) => {
    let params: SamplingParams;
    try {
      params = parseSamplingParams(Array.isArray(rawParams) ? rawParams[i] : rawParams);
    } catch (e) {
      if (e instanceof SamplingError) throw new HttpError(400, e.message);
      throw e;
    }
    const promptText = p.text ?? (p.ids ?? []).join(' ');
    // The model's view of the prompt: the ids as sent, or the target tokenizer's ids of the text,
    // BOS first, as SGLang tokenizes it (self.tokenizer(text): sglang==0.5.4:srt/managers/tokenizer_manager.py:554;
    // sglang==0.5.23:srt/managers/tokenizer_manager.py:1065); prompt_tokens counts those ids, as
    // bench_serving's client-side prompt_len does (sglang==0.5.4:bench_serving.py:1157-1160).
    const ids = p.ids ?? ctx.lm.tok.encode(p.text!, true);
    const promptTokens = Math.max(1, ids.length);
    checkLength(ctx, promptTokens, params.max_new_tokens);
    const ridRaw = Array.isArray(body.rid) ? body.rid[i] : listBatched ? undefined : body.rid;
    const baseRid = typeof ridRaw === 'string' && ridRaw !== '' ? ridRaw : null;
    nMax = Math.max(nMax, params.n);
    for (let c = 0; c < params.n; c++) {
      const rid = (baseRid ?? randomUUID().replace(/-/g, '')) + (params.n > 1 && baseRid ? `_${c}` : '');
      if ((dup.inFlight && ctx.engine.hasRid(rid)) || (dup.inBatch && batchRids.has(rid))) {
        throw new HttpError(400, `Duplicate request ID detected: ${rid}`);
      }
      batchRids.add(rid);
      const req: GenRequest = {
        rid,
        key: seedKey(promptText, params.sampling_seed, c),
        promptTokens,
        promptUnits: ids.map(String),
        params: { ...params, max_new_tokens: params.max_new_tokens ?? ctx.resolved.contextLen - promptTokens - 1 },
        kind,
        context: ids,
        bareFirst: p.ids === null,
      };
      const capture = ctx.capture;
      // Every prefill reaches the plugin's hook, with or without a client rid (SGLang makes one:
      // uuid4().hex), the server's own warmup included; the file is written before SGLang's own
      // result processing, so before the response (py/aerie_hs/sglang_hook.py _prefill_wrapper).
      if (capture) req.onPrefill = (r) => capture.capture(r.req.rid, ids, kind === 'real');
      items.push({ req, index: items.length });
    }
  });
  return { items, batched: listBatched || nMax > 1, body };
}

export function metaInfo(
  ctx: ServerContext,
  r: ReqState,
  final: boolean,
  body: Record<string, unknown>,
): Record<string, unknown> {
  const m: Record<string, unknown> = {
    id: r.req.rid,
    finish_reason: r.finishReason,
    prompt_tokens: r.req.promptTokens,
    weight_version: ctx.resolved.args.weight_version,
    completion_tokens: r.outputIds.length,
    cached_tokens: r.cachedTokens,
  };
  const spec = ctx.resolved.spec;
  if (final && ctx.accept && spec) {
    Object.assign(
      m,
      specMeta(ctx.env.release, {
        verifyCt: r.verifyCt,
        completionTokens: r.outputIds.length,
        correctDrafts: r.acceptedDrafts,
        numSteps: spec.numSteps,
        numDraftTokens: spec.numDraftTokens,
        histogram: r.acceptHistogram,
      }),
    );
  }
  if (body.return_logprob) {
    m.input_token_logprobs = (r.req.context ?? []).map((id, i) => [
      i === 0 ? null : pseudoLogprob(r.req.key + ':in', i),
      id,
      null,
    ]);
    m.output_token_logprobs = r.outputIds.map((id, i) => [pseudoLogprob(r.req.key, i), id, null]);
  }
  const hsMode = requestHsMode(body.return_hidden_states);
  if (final && ctx.states && (hsMode === 'last' || hsMode === 'full')) {
    m.hidden_states = hiddenStatesMeta(
      ctx.states,
      Boolean(ctx.resolved.args.enable_return_aux_hidden_states),
      r.req.context ?? [],
      r.outputIds,
      hsMode,
      { cached: r.cachedTokens, chunk: ctx.resolved.args.chunked_prefill_size as number },
    );
  }
  if (final) m.e2e_latency = r.e2eLatency;
  return m;
}

/** Where a stream stands: what the client already has (for the releases that stream deltas). */
interface Sent {
  ids: number;
  text: number;
}

function output(
  ctx: ServerContext,
  r: ReqState,
  final: boolean,
  body: Record<string, unknown>,
  index: number | null,
  sent: Sent | null,
) {
  let ids = [...r.outputIds];
  let text = r.text;
  if (sent) {
    const deltas = streamDeltas(ctx.env.release, ctx.resolved.args);
    if (deltas.ids) ids = ids.slice(sent.ids);
    if (deltas.text) text = text.slice(sent.text);
    sent.ids = r.outputIds.length;
    sent.text = r.text.length;
  }
  const o: Record<string, unknown> = { text, output_ids: ids, meta_info: metaInfo(ctx, r, final, body) };
  if (index !== null) o.index = index;
  return o;
}

export async function handleGenerate(x: Exchange): Promise<void> {
  const { ctx } = x;
  const streaming = Boolean((x.body as Record<string, unknown> | undefined)?.stream);
  let prepared: ReturnType<typeof prepareGenerate>;
  try {
    prepared = prepareGenerate(x);
  } catch (e) {
    // SGLang validates inside the stream generator: a streaming request gets 200 and an error event.
    if (!(streaming && e instanceof HttpError)) throw e;
    startSse(x);
    sseData(x, { error: { message: e.message } });
    sseData(x, '[DONE]');
    x.res.end();
    return;
  }
  const { items, batched, body } = prepared;
  const states: ReqState[] = [];
  if (streaming) startSse(x);
  const sent: Sent[] = items.map(() => ({ ids: 0, text: 0 }));
  for (const item of items) {
    if (streaming) {
      const at = sent[item.index];
      item.req.onProgress = (r) => {
        if (r.outputIds.length === at.ids || r.finishReason) return; // the final chunk goes out after the dump
        sseData(x, output(ctx, r, false, body, batched ? item.index : null, at));
      };
    }
    states.push(ctx.engine.submit(item.req));
  }
  x.res.on('close', () => {
    for (const s of states) if (!s.finishReason) ctx.engine.abort(s, 'The client disconnected.');
  });
  const finals = items.map(async (item, i) => {
    await states[i].done;
    if (streaming) sseData(x, output(ctx, states[i], true, body, batched ? item.index : null, sent[item.index]));
  });
  await Promise.all(finals);
  if (streaming) {
    sseData(x, '[DONE]');
    x.res.end();
    return;
  }
  const outs = states.map((s) => output(ctx, s, true, body, null, null));
  sendJson(x, 200, batched ? outs : outs[0]);
}
