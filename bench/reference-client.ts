/**
 * The floor for bench/client-overhead.ts: the least a client can do and still measure
 * a /generate stream. One raw socket per slot, no SSE parsing, no JSON parsing except
 * the e2e_latency number in the last frame. Whatever "client − server" latency this
 * client sees was added outside any client: in the server's HTTP layer and its send
 * queues, and in the kernel. Not for real use (it assumes the simulator's exact
 * chunked framing).
 */
import net from 'node:net';
import { performance } from 'node:perf_hooks';

const END = '0\r\n\r\n';
const TAIL = 1024;

export interface ReferenceRun {
  durationMs: number;
  /** Client E2E minus the server's e2e_latency, per request (ms). */
  gapsMs: number[];
  sumE2eMs: number;
}

export async function referenceLevel(
  port: number,
  prompts: string[],
  concurrency: number,
  outputLen: number,
): Promise<ReferenceRun> {
  let next = 0;
  const gapsMs: number[] = [];
  let sumE2eMs = 0;
  const lane = async (): Promise<void> => {
    const sock = net.connect({ host: '127.0.0.1', port });
    sock.setNoDelay(true);
    await new Promise((r) => sock.once('connect', r));
    try {
      while (next < prompts.length) {
        const body = JSON.stringify({
          text: prompts[next++],
          sampling_params: { max_new_tokens: outputLen, temperature: 0, ignore_eos: true },
          stream: true,
        });
        const sentAt = performance.now();
        await new Promise<void>((resolve, reject) => {
          let tail = '';
          const onData = (d: Buffer): void => {
            tail = (tail + d.toString('latin1', Math.max(0, d.length - TAIL))).slice(-TAIL);
            if (!tail.endsWith(END)) return;
            const now = performance.now();
            const m = /"e2e_latency":\s*([0-9.eE+-]+)/.exec(tail);
            sock.off('data', onData);
            if (!m) return reject(new Error('reference client: no e2e_latency in the last frame'));
            gapsMs.push(now - sentAt - Number(m[1]) * 1000);
            sumE2eMs += now - sentAt;
            resolve();
          };
          sock.on('data', onData);
          sock.write(
            `POST /generate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
          );
        });
      }
    } finally {
      sock.destroy();
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: Math.min(concurrency, prompts.length) }, lane));
  return { durationMs: performance.now() - start, gapsMs, sumE2eMs };
}
