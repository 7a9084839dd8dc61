/**
 * One sample through the patched server: prefill it, wait for its hidden-state dump and
 * verify the exact size. Moving it off the RAM-backed dump dir is extract-mover.ts's job.
 */
import type { Host } from '../hosts/host.js';
import { expectedDumpBytes, type ExtractItem } from './extract-plan.js';
import { postJson } from './generate-http.js';
import { sleep } from './generate-pool.js';

/** The dump was missing or the wrong size: worth another prefill. */
export class BadDumpError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BadDumpError';
  }
}

/** Moving or checking the output failed (disk full, permissions): every sample would fail, so stop. */
export class OutputWriteError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutputWriteError';
  }
}

export interface DumpContext {
  host: Host;
  baseUrl: string;
  dumpDir: string;
  hiddenSize: number;
  dumpWaitMs: number;
  requestTimeoutMs: number;
}

export function dumpPathFor(dumpDir: string, id: string): string {
  return `${dumpDir}/${id}.hs`;
}

/** Remove a file if it is there; a missing file is the goal, not an error. */
export async function removeIfPresent(host: Host, path: string): Promise<void> {
  if (await host.stat(path)) await host.remove(path);
}

/** Poll until the dump reaches exactly `expected` bytes; larger, or still short at the deadline, is bad. */
async function waitForDump(ctx: DumpContext, path: string, expected: number, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + ctx.dumpWaitMs;
  let interval = 20;
  for (;;) {
    const st = await ctx.host.stat(path);
    if (st && st.size === expected) return;
    if (st && st.size > expected) throw new BadDumpError(`dump ${path} has ${st.size} bytes, expected ${expected}`);
    if (Date.now() >= deadline) {
      throw new BadDumpError(
        st
          ? `dump ${path} has ${st.size} bytes after ${ctx.dumpWaitMs} ms, expected ${expected}`
          : `no dump at ${path} after ${ctx.dumpWaitMs} ms (is the server the patched one, with its dump dir set?)`,
      );
    }
    await sleep(interval, signal);
    interval = Math.min(interval * 1.5, 500);
  }
}

/** A verified dump, still in the dump dir at `path`. */
export interface Dumped {
  path: string;
  tokens: number;
  bytes: number;
}

export async function dumpOne(ctx: DumpContext, item: ExtractItem, signal: AbortSignal): Promise<Dumped> {
  const { host } = ctx;
  const src = dumpPathFor(ctx.dumpDir, item.id);
  // A leftover from an interrupted attempt would pass for this attempt's dump.
  await removeIfPresent(host, src);
  const res = (await postJson(
    `${ctx.baseUrl}/generate`,
    { text: item.text, rid: item.id, sampling_params: { max_new_tokens: 0, temperature: 0 } },
    { signal, timeoutMs: ctx.requestTimeoutMs },
  )) as { meta_info?: { prompt_tokens?: unknown } };
  const tokens = res?.meta_info?.prompt_tokens;
  if (typeof tokens !== 'number' || !Number.isSafeInteger(tokens) || tokens <= 0) {
    throw new Error(`answer has no usable meta_info.prompt_tokens (${JSON.stringify(tokens)})`);
  }
  const expected = expectedDumpBytes(tokens, ctx.hiddenSize);
  try {
    await waitForDump(ctx, src, expected, signal);
  } catch (err) {
    await removeIfPresent(host, src).catch(() => undefined);
    throw err;
  }
  return { path: src, tokens, bytes: expected };
}
