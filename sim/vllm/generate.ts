/**
 * POST /v1/completions and /v1/chat/completions of `aerie-sim vllm`: the request mapped onto the
 * engine, answered whole or streamed as vLLM 0.32.0 streams it, and a 500 to every open request
 * once the engine has died (death.ts).
 */
import { randomUUID } from 'node:crypto';
import type http from 'node:http';
import { chatMessages, samplingFrom } from '../sglang/api-openai.js';
import type { FinishReason, GenRequest, ReqState } from '../sglang/engine.js';
import type { SamplingParams } from '../sglang/sampling.js';
import { renderChat, seedKey } from '../sglang/text.js';
import { ApiError, type Body, bodyOf, checkModel } from './api.js';
import type { VllmServer } from './context.js';
import { ENGINE_DEAD_BODY } from './tracebacks.js';

function finishName(f: FinishReason | null): 'stop' | 'length' | 'abort' {
  return !f || f.type === 'stop' ? 'stop' : f.type === 'length' ? 'length' : 'abort';
}

/** vLLM's stop_reason: the matched stop string or token id, None for EOS and length. */
function stopReason(f: FinishReason | null, eos: number): number | string | null {
  return f && f.type === 'stop' && f.matched !== eos ? f.matched : null;
}

export async function generate(
  srv: VllmServer,
  chat: boolean,
  body: Body,
  res: http.ServerResponse,
  head: (code: number, type: string) => void,
  json: (code: number, v: unknown) => void,
): Promise<void> {
  const { engine, fingerprint, keepAlive, lm, maxModelLen, metrics, servedNames, shutdown, target } = srv;
  if (srv.status === 'dead') {
    json(500, ENGINE_DEAD_BODY);
    if (!keepAlive) shutdown('engine-dead');
    return;
  }
  checkModel(srv, body);
  let prompt: string;
  let ids: number[];
  if (chat) {
    prompt = renderChat(chatMessages(body));
    ids = lm.tok.encode(prompt, false);
  } else {
    let p = body.prompt;
    if (Array.isArray(p) && p.length === 1) p = p[0];
    if (typeof p !== 'string')
      throw new ApiError(400, 'The simulator serves one string prompt per /v1/completions request', 'BadRequestError');
    prompt = p;
    ids = lm.tok.encode(prompt, true);
  }
  const params: SamplingParams = samplingFrom(body, chat ? null : 16);
  const promptTokens = Math.max(1, ids.length);
  const maxNew = params.max_new_tokens ?? maxModelLen - promptTokens;
  if (promptTokens + maxNew > maxModelLen)
    throw new ApiError(
      400,
      `This model's maximum context length is ${maxModelLen} tokens. However, you requested ${maxNew} output tokens and your prompt contains ${promptTokens} input tokens, for a total of ${promptTokens + maxNew} tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=max_tokens, value=${maxNew})`,
      'BadRequestError',
      'max_tokens',
    );
  const id = `${chat ? 'chatcmpl' : 'cmpl'}-${randomUUID().replace(/-/g, '').slice(0, 16)}`;
  const created = Math.floor(Date.now() / 1000);
  const model = typeof body.model === 'string' ? body.model : servedNames[0]!;
  const object = chat ? 'chat.completion' : 'text_completion';
  const chunkObject = chat ? 'chat.completion.chunk' : 'text_completion';
  const streaming = Boolean(body.stream);
  const opts = bodyOf(body.stream_options);
  const includeUsage = streaming && Boolean(opts.include_usage);
  const continuous = includeUsage && Boolean(opts.continuous_usage_stats);
  const usage = (completion: number) => ({
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completion,
    completion_tokens: completion,
  });
  const send = (v: unknown) => {
    if (!res.writableEnded) res.write(`data: ${typeof v === 'string' ? v : JSON.stringify(v)}\n\n`);
  };
  srv.lastPrompt = promptTokens;
  metrics.promptTokens += promptTokens;
  const states: ReqState[] = [];
  const sent: string[] = [];
  const finishSent: boolean[] = [];
  const choiceDelta = (i: number, text: string, f: FinishReason | null) =>
    chat
      ? {
          index: i,
          delta: text === '' && f ? {} : { content: text },
          logprobs: null,
          finish_reason: f ? finishName(f) : null,
          ...(f ? { stop_reason: stopReason(f, target.eosTokenId) } : {}),
          token_ids: null,
        }
      : {
          index: i,
          text,
          logprobs: null,
          finish_reason: f ? finishName(f) : null,
          stop_reason: f ? stopReason(f, target.eosTokenId) : null,
          token_ids: null,
        };
  const chunk = (choices: unknown[], completion: number | null) => ({
    id,
    object: chunkObject,
    created,
    model,
    choices,
    ...(continuous && completion !== null ? { usage: { ...usage(completion), completion_tokens_details: null } } : {}),
  });
  return new Promise<void>((resolveHandler) => {
    if (streaming) head(200, 'text/event-stream; charset=utf-8');
    for (let i = 0; i < params.n; i++) {
      sent.push('');
      finishSent.push(false);
      const snap = { hist: [] as number[] };
      const req: GenRequest = {
        rid: `${id}-${i}`,
        key: seedKey(prompt, params.sampling_seed, i),
        promptTokens,
        promptUnits: ids.map(String),
        params: { ...params, max_new_tokens: maxNew },
        kind: 'real',
        context: ids,
        bareFirst: true,
        onProgress: (r) => {
          // The spec-decode counters move with every verify step (v1/spec_decode/metrics.py:266-280).
          if (metrics.spec) {
            r.acceptHistogram.forEach((n, acc) => {
              for (let c = snap.hist[acc] ?? 0; c < (n ?? 0); c++) metrics.spec!.step(acc);
              snap.hist[acc] = n ?? 0;
            });
          }
          if (!streaming) return;
          const delta = r.text.slice(sent[i]!.length);
          const f = r.finishReason;
          if (delta === '' && !f) return;
          sent[i] = r.text;
          if (f) finishSent[i] = true;
          send(chunk([choiceDelta(i, delta, f)], r.outputIds.length));
        },
      };
      if (streaming && chat)
        send({
          ...chunk([{ index: i, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }], 0),
          prompt_token_ids: null,
          prompt_text: null,
        });
      states.push(engine.submit(req));
    }
    res.on('close', () => {
      for (const s of states) if (!s.finishReason) engine.abort(s, 'The client disconnected.');
    });
    const finished = Promise.all(states.map((s) => s.done)).then(() => 'done' as const);
    void Promise.race([finished, srv.deadPromise.then(() => 'dead' as const)]).then((how) => {
      if (how === 'dead') {
        if (!res.headersSent) json(500, ENGINE_DEAD_BODY);
        else {
          send({ error: ENGINE_DEAD_BODY.error });
          res.end();
        }
        metrics.success.error += states.length;
        if (!keepAlive) setImmediate(() => shutdown('engine-dead'));
        return resolveHandler();
      }
      for (const s of states) {
        metrics.generationTokens += s.outputIds.length;
        metrics.success[finishName(s.finishReason)] += 1;
      }
      const completion = states.reduce((n, s) => n + s.outputIds.length, 0);
      if (streaming) {
        states.forEach((s, i) => {
          if (!finishSent[i]) send(chunk([choiceDelta(i, '', s.finishReason)], s.outputIds.length));
        });
        if (includeUsage)
          send({
            id,
            object: chunkObject,
            created,
            model,
            choices: [],
            usage: usage(completion),
            system_fingerprint: fingerprint,
          });
        send('[DONE]');
        res.end();
        return resolveHandler();
      }
      const choices = states.map((s, i) =>
        chat
          ? {
              index: i,
              message: {
                role: 'assistant',
                content: s.text,
                refusal: null,
                annotations: null,
                audio: null,
                function_call: null,
                reasoning: null,
              },
              logprobs: null,
              finish_reason: finishName(s.finishReason),
              stop_reason: stopReason(s.finishReason, target.eosTokenId),
              token_ids: null,
              routed_experts: null,
            }
          : {
              index: i,
              text: s.text,
              logprobs: null,
              finish_reason: finishName(s.finishReason),
              stop_reason: stopReason(s.finishReason, target.eosTokenId),
              token_ids: null,
              prompt_logprobs: null,
              prompt_token_ids: null,
              routed_experts: null,
            },
      );
      json(200, {
        id,
        object,
        created,
        model,
        choices,
        service_tier: null,
        system_fingerprint: fingerprint,
        usage: { ...usage(completion), prompt_tokens_details: null, completion_tokens_details: null },
        ...(chat ? { prompt_logprobs: null, prompt_token_ids: null, prompt_text: null } : {}),
        kv_transfer_params: null,
        ec_transfer_params: null,
        metrics: null,
      });
      resolveHandler();
    });
  });
}
