/**
 * POST /generate: SGLang's native API. Single or batched prompts (`text` list, `n`),
 * non-stream JSON or SSE with cumulative `text`/`output_ids`, meta_info with the
 * speculative counters, and aerie's capture of every prefill when its plugin is installed.
 */
import { randomUUID } from 'node:crypto';
import type { GenRequest, ReqState, RequestKind } from './engine.js';
import { type Exchange, HttpError, WARMUP_HEADER, sendJson, sseData, startSse } from './http.js';
import type { ServerContext } from './http.js';
import { SamplingError, type SamplingParams, parseSamplingParams } from './sampling.js';
import { hiddenStatesMeta, hsRequestProblem, requestHsMode, serverHsMode } from './stock.js';
import { countPromptTokens, hash32, pseudoLogprob, seedKey, splitWords } from './text.js';

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
    throw new HttpError(400, `The input (${promptTokens} tokens) is longer than the model's context length (${ctxLen} tokens).`);
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
    if (ids.every((v) => typeof v === 'number')) return { list: [{ text: null, ids: ids as number[] }], batched: false };
    return { list: ids.map((row) => ({ text: null, ids: (row as number[]).map(Number) })), batched: true };
  }
  throw new HttpError(400, 'text must be a string or a list of strings.');
}

/** Turn one /generate body into engine requests (validation errors become HTTP 400). */
export function prepareGenerate(x: Exchange): { items: Prepared[]; batched: boolean; body: Record<string, unknown> } {
  const { ctx } = x;
  const body = (x.body ?? {}) as Record<string, unknown>;
  if (typeof body !== 'object' || Array.isArray(body)) throw new HttpError(400, 'The request body must be a JSON object.');
  const { list, batched: listBatched } = prompts(body);
  const rawParams = body.sampling_params;
  const hsMode = requestHsMode(body.return_hidden_states);
  if (hsMode !== null && hsMode !== 'last' && hsMode !== 'full') throw new HttpError(400, hsMode);
  const hsProblem = hsRequestProblem(hsMode, serverHsMode(ctx.resolved.args), ctx.resolved.args.return_hidden_states_mode);
  if (hsProblem) throw new HttpError(400, hsProblem);
  const kind: RequestKind = x.req.headers[WARMUP_HEADER] ? 'warmup' : 'real';
  const items: Prepared[] = [];
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
    const promptTokens = p.text !== null ? countPromptTokens(p.text) : Math.max(1, p.ids!.length);
    checkLength(ctx, promptTokens, params.max_new_tokens);
    const ridRaw = Array.isArray(body.rid) ? body.rid[i] : listBatched ? undefined : body.rid;
    const baseRid = typeof ridRaw === 'string' && ridRaw !== '' ? ridRaw : null;
    nMax = Math.max(nMax, params.n);
    // The model's view of the prompt: the ids as sent, or the target tokenizer's ids of the text (BOS first, as SGLang's tokenizer adds it).
    const ids = p.ids ?? ctx.lm.tok.encode(p.text!, true);
    for (let c = 0; c < params.n; c++) {
      const rid = (baseRid ?? randomUUID().replace(/-/g, '')) + (params.n > 1 && baseRid ? `_${c}` : '');
      const req: GenRequest = {
        rid,
        key: seedKey(promptText, params.sampling_seed, c),
        promptTokens,
        promptUnits: p.text !== null ? splitWords(p.text) : p.ids!.map(String),
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

export function metaInfo(ctx: ServerContext, r: ReqState, final: boolean, body: Record<string, unknown>): Record<string, unknown> {
  const m: Record<string, unknown> = {
    id: r.req.rid,
    finish_reason: r.finishReason,
    prompt_tokens: r.req.promptTokens,
    weight_version: ctx.resolved.args.weight_version,
    completion_tokens: r.outputIds.length,
    cached_tokens: r.cachedTokens,
  };
  if (ctx.accept) {
    m.spec_verify_ct = r.verifyCt;
    m.spec_accept_rate = r.proposedDrafts > 0 ? r.acceptedDrafts / r.proposedDrafts : 0;
    m.spec_accept_length = r.verifyCt > 0 ? r.outputIds.length / r.verifyCt : 0;
    m.spec_accept_token_num = r.acceptedDrafts;
    m.spec_draft_token_num = r.proposedDrafts;
  }
  if (body.return_logprob) {
    m.input_token_logprobs = r.req.promptUnits.map((u, i) => [i === 0 ? null : pseudoLogprob(r.req.key + ':in', i), hash32(u) % 32000, null]);
    m.output_token_logprobs = r.outputIds.map((id, i) => [pseudoLogprob(r.req.key, i), id, null]);
  }
  const hsMode = requestHsMode(body.return_hidden_states);
  if (final && ctx.states && (hsMode === 'last' || hsMode === 'full')) {
    m.hidden_states = hiddenStatesMeta(ctx.states, Boolean(ctx.resolved.args.enable_return_aux_hidden_states), r.req.context ?? [], r.outputIds, hsMode,
      { cached: r.cachedTokens, chunk: ctx.resolved.args.chunked_prefill_size as number });
  }
  if (final) m.e2e_latency = r.e2eLatency;
  return m;
}

function output(ctx: ServerContext, r: ReqState, final: boolean, body: Record<string, unknown>, index: number | null) {
  const o: Record<string, unknown> = { text: r.text, output_ids: [...r.outputIds], meta_info: metaInfo(ctx, r, final, body) };
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
  for (const item of items) {
    if (streaming) {
      let sent = -1;
      item.req.onProgress = (r) => {
        if (r.outputIds.length === sent || r.finishReason) return; // the final chunk goes out after the dump
        sent = r.outputIds.length;
        sseData(x, output(ctx, r, false, body, batched ? item.index : null));
      };
    }
    states.push(ctx.engine.submit(item.req));
  }
  x.res.on('close', () => {
    for (const s of states) if (!s.finishReason) ctx.engine.abort(s, 'The client disconnected.');
  });
  const finals = items.map(async (item, i) => {
    await states[i].done;
    if (streaming) sseData(x, output(ctx, states[i], true, body, batched ? item.index : null));
  });
  await Promise.all(finals);
  if (streaming) {
    sseData(x, '[DONE]');
    x.res.end();
    return;
  }
  const outs = states.map((s) => output(ctx, s, true, body, null));
  sendJson(x, 200, batched ? outs : outs[0]);
}
