/**
 * One sample through the capture server: prefill its ids under its id as rid, check the
 * server saw exactly those tokens, and wait for the capture's result file in the dump folder
 * (`<rid>.safetensors`, or `<rid>.error.json` when the capture refused the request). Both
 * appear only by rename (py/aerie_hs/capture.py), so a file that is there is complete. The
 * HTTP answer can come before the file: the capture writes after the batch's result is
 * processed (py/aerie_hs/CAPTURE.md, "not yet done by aerie").
 */
import type { Host } from '../../hosts/host.js';
import { HttpStatusError, postJson, sleep } from '../common/index.js';

/** This sample's capture went wrong (refused, missing, wrong length): worth another prefill, then an error row. */
export class BadDumpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadDumpError';
  }
}

export interface PrefillContext {
  host: Host;
  baseUrl: string;
  dumpDir: string;
  /** How long the result file may lag the HTTP answer. */
  dumpWaitMs: number;
  requestTimeoutMs: number;
}

export interface TokenRow {
  id: string;
  input_ids: number[];
  loss_mask: number[];
}

/** A finished capture, its dump still in the dump folder. */
export interface Prefilled {
  dumpPath: string;
  /** The server's temperature-0 next token after the whole prompt: the self-check's greedy reference. */
  greedyNext: number;
}

export const dumpPathFor = (dumpDir: string, id: string): string => `${dumpDir}/${id}.safetensors`;
export const errorPathFor = (dumpDir: string, id: string): string => `${dumpDir}/${id}.error.json`;

/** Remove a file if it is there; a missing file is the goal, not an error. */
export async function removeIfPresent(host: Host, path: string): Promise<void> {
  if (await host.stat(path)) await host.remove(path);
}

export async function prefillOne(ctx: PrefillContext, row: TokenRow, signal: AbortSignal): Promise<Prefilled> {
  const { host } = ctx;
  const dump = dumpPathFor(ctx.dumpDir, row.id);
  const refusal = errorPathFor(ctx.dumpDir, row.id);
  // A leftover of an interrupted attempt would pass for this attempt's result.
  await removeIfPresent(host, dump);
  await removeIfPresent(host, refusal);
  // The request the capture's contract names (py/aerie_hs/CAPTURE.md, "aerie's capture"): ids,
  // rid = sample id, one greedy token; no return_hidden_states, so no state crosses HTTP.
  const res = (await postWhenRidFree(ctx, row, signal)) as {
    output_ids?: unknown;
    meta_info?: { prompt_tokens?: unknown };
  };
  const seen = res?.meta_info?.prompt_tokens;
  if (seen !== row.input_ids.length) {
    throw new BadDumpError(
      `the server counted ${JSON.stringify(seen)} prompt tokens for ${row.input_ids.length} input ids: it did not prefill the ids aerie sent ` +
        '(a server that re-tokenizes, or a chat template applied to ids)',
    );
  }
  // Non-streamed answers carry the whole output_ids (sglang==0.5.23:srt/managers/tokenizer_manager.py:2665-2669).
  const greedy = Array.isArray(res.output_ids) ? res.output_ids[0] : undefined;
  if (typeof greedy !== 'number' || !Number.isInteger(greedy)) {
    throw new BadDumpError(
      `the answer has no output_ids[0] (got ${JSON.stringify(res.output_ids)}): no greedy token to check the states against`,
    );
  }
  await waitForResult(ctx, row.id, dump, refusal, signal);
  return { dumpPath: dump, greedyNext: greedy };
}

/**
 * SGLang 0.5.12 on refuses a rid still in flight with 400 "Duplicate request ID detected"
 * (sglang==0.5.12:srt/managers/tokenizer_manager.py:2595, sglang==0.5.23:srt/managers/tokenizer_manager.py:3836):
 * an earlier attempt of this sample (a client timeout, a dropped link) is still being served.
 * Ask again once it ends, within the request timeout; its dump, if it lands first, holds the
 * same ids. 0.5.4 and 0.5.9 replace the earlier request instead (sim/sglang/profile.ts).
 */
async function postWhenRidFree(ctx: PrefillContext, row: TokenRow, signal: AbortSignal): Promise<unknown> {
  const deadline = Date.now() + ctx.requestTimeoutMs;
  let interval = 50;
  for (;;) {
    try {
      return await postJson(
        `${ctx.baseUrl}/generate`,
        { input_ids: row.input_ids, rid: row.id, sampling_params: { max_new_tokens: 1, temperature: 0 } },
        { signal, timeoutMs: ctx.requestTimeoutMs },
      );
    } catch (err) {
      if (!(err instanceof HttpStatusError && err.status === 400 && /Duplicate request ID/.test(err.message)))
        throw err;
      if (Date.now() >= deadline) {
        throw new BadDumpError(
          `the server still serves an earlier request for ${row.id} after ${ctx.requestTimeoutMs} ms (400 Duplicate request ID)`,
        );
      }
      await sleep(interval, signal);
      interval = Math.min(interval * 2, 1000);
    }
  }
}

async function waitForResult(
  ctx: PrefillContext,
  id: string,
  dump: string,
  refusal: string,
  signal: AbortSignal,
): Promise<void> {
  const deadline = Date.now() + ctx.dumpWaitMs;
  let interval = 20;
  for (;;) {
    if (await ctx.host.stat(dump)) return;
    if (await ctx.host.stat(refusal)) {
      let why = 'no reason given';
      try {
        why = String(
          (JSON.parse((await ctx.host.readFile(refusal)).toString('utf8')) as { error?: unknown }).error ?? why,
        );
      } catch {
        // an unreadable refusal is still a refusal
      }
      await removeIfPresent(ctx.host, refusal).catch(() => undefined);
      throw new BadDumpError(`the capture refused ${id}: ${why}`);
    }
    if (Date.now() >= deadline) {
      throw new BadDumpError(
        `no ${dump} ${ctx.dumpWaitMs} ms after the answer: is aerie's capture loaded in this server? Its log names "aerie_hs" when it is`,
      );
    }
    await sleep(interval, signal);
    interval = Math.min(interval * 1.5, 500);
  }
}
