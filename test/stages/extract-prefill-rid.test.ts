/**
 * S14: SGLang 0.5.12 on answers 400 "Duplicate request ID detected" while an earlier request
 * with the same rid is still being served (an extract retry after a client timeout). Through
 * real HTTP and real files: the prefill waits for the rid to come free and asks again, rather
 * than failing the sample; a rid that never comes free fails within the request timeout.
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { BadDumpError, prefillOne } from '../../src/stages/extract/prefill.js';
import { startFakeServer, type FakeServer } from '../support/fake-server.js';
import { useLocalHost } from '../support/local-host.js';

const fx = useLocalHost('aerie-prefill-rid-', { each: true });
let dir: string;
let host: LocalHost;
let server: FakeServer | undefined;

beforeEach(() => {
  ({ dir, host } = fx);
});
// Registered after the host's, so it runs first: the fake server closes before the folder goes.
afterEach(async () => {
  await server?.close();
  server = undefined;
});

/** A server whose rid stays busy for `busyAnswers` requests, answering as 0.5.23 does, then serves it. */
async function serve(busyAnswers: number): Promise<{ baseUrl: string; posts: () => number }> {
  let posts = 0;
  // A failed writeFile surfaces as an unhandled rejection, which fails the vitest run.
  server = await startFakeServer(async (body, res) => {
    posts++;
    const { rid, input_ids: ids } = JSON.parse(body) as { rid: string; input_ids: number[] };
    if (posts <= busyAnswers) {
      // The native route's ValueError body (sglang==0.5.23:srt/entrypoints/http_server.py:988-990,2246-2250).
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: `Duplicate request ID detected: ${rid}` } }));
      return;
    }
    await writeFile(join(dir, `${rid}.safetensors`), 'dump');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        text: 'x',
        output_ids: [7],
        meta_info: { id: rid, prompt_tokens: ids.length, completion_tokens: 1 },
      }),
    );
  });
  return { baseUrl: server.baseUrl, posts: () => posts };
}

const row = { id: 's1', input_ids: [1, 2, 3], loss_mask: [0, 1, 1] };

describe('extract prefill and a rid still in flight (S14)', () => {
  it('waits for the earlier request to end and asks again', async () => {
    const s = await serve(3);
    const out = await prefillOne(
      { host, baseUrl: s.baseUrl, dumpDir: dir, dumpWaitMs: 5_000, requestTimeoutMs: 30_000 },
      row,
      new AbortController().signal,
    );
    expect(out).toEqual({ dumpPath: join(dir, 's1.safetensors'), greedyNext: 7 });
    expect(s.posts()).toBe(4);
  });

  it('fails the sample once the request timeout has passed with the rid still busy', async () => {
    const s = await serve(Number.POSITIVE_INFINITY);
    const err = await prefillOne(
      { host, baseUrl: s.baseUrl, dumpDir: dir, dumpWaitMs: 5_000, requestTimeoutMs: 400 },
      row,
      new AbortController().signal,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BadDumpError);
    expect(String(err)).toMatch(/still serves an earlier request for s1 after 400 ms/);
    expect(s.posts()).toBeGreaterThan(1);
  });
});
