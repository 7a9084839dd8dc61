/**
 * What the generate benches share: a synthetic input, a Temporal dev server of their own, an
 * `aerie worker` process as a researcher runs it (compiled from dist/ when the build is
 * current, else through tsx), and reading activity times out of a workflow history.
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { buildIsCurrent } from '../bin/build-stamp.mjs';
import { AERIE_HOME } from '../src/config/load.js';
import { ensureSearchAttributes } from '../src/temporal/connect.js';
import { ensureDevServer, freePort, stopDevServer } from '../src/temporal/dev-server.js';

/** A synthetic set in both input formats, a third ShareGPT, one question each. */
export async function writeInput(path: string, n: number): Promise<number> {
  const out = createWriteStream(path);
  for (let i = 0; i < n; i++) {
    const words = Array.from({ length: 20 + (i % 40) }, (_, j) => `w${(i * 7 + j) % 997}`).join(' ');
    const row =
      i % 3 === 0
        ? {
            id: `s${i}`,
            conversations: [
              { from: 'human', value: `question ${i}: ${words}` },
              { from: 'gpt', value: 'an old answer' },
            ],
          }
        : {
            id: `s${i}`,
            conversations: [
              { role: 'system', content: 'Answer briefly.' },
              { role: 'user', content: `question ${i}: ${words}` },
              { role: 'assistant', content: 'an old answer' },
            ],
          };
    if (!out.write(JSON.stringify(row) + '\n')) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((r, j) => out.end((e?: Error | null) => (e ? j(e) : r())));
  return (await stat(path)).size;
}

/** Polls fn every 200 ms until it gives a value. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

export interface BenchTemporal {
  address: string;
  client: Client;
  stop(): Promise<void>;
}

export async function startTemporal(stateDir: string): Promise<BenchTemporal> {
  const server = await ensureDevServer({
    dir: stateDir,
    port: await freePort(),
    uiPort: await freePort(),
    headless: true,
  });
  const connection = await Connection.connect({ address: server.address });
  await ensureSearchAttributes(connection, 'default');
  return {
    address: server.address,
    client: new Client({ connection, namespace: 'default' }),
    async stop() {
      await connection.close().catch(() => undefined);
      await stopDevServer(stateDir);
    },
  };
}

/** `aerie worker` in a process group of its own, logging to logPath; returns its pid (= its group). */
export async function spawnWorker(
  address: string,
  logPath: string,
  opts: { fromSource?: boolean; nodeFlags?: string[] } = {},
): Promise<{ pid: number; fromSource: boolean }> {
  const fromSource = opts.fromSource || !buildIsCurrent(AERIE_HOME);
  const log = await open(logPath, 'a');
  const worker = spawn(process.execPath, [...(opts.nodeFlags ?? []), join(AERIE_HOME, 'bin', 'aerie.mjs'), 'worker'], {
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: address,
      TEMPORAL_NAMESPACE: 'default',
      AERIE_FROM_SOURCE: fromSource ? '1' : '0',
    },
    detached: true,
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  return { pid: worker.pid!, fromSource };
}

export interface HistoryEvent {
  eventId?: unknown;
  eventTime?: { seconds?: unknown; nanos?: number | null } | null;
  activityTaskScheduledEventAttributes?: { activityType?: { name?: string | null } | null } | null;
  activityTaskStartedEventAttributes?: { scheduledEventId?: unknown } | null;
  activityTaskCompletedEventAttributes?: { scheduledEventId?: unknown } | null;
}

/** The first start and the last completion of the named activity, in ms since the epoch. */
export function activitySpan(
  events: readonly HistoryEvent[],
  name: string,
): { from: number; to: number; count: number } {
  const scheduled = new Map<string, string>();
  let from = Infinity;
  let to = 0;
  let count = 0;
  for (const e of events) {
    const at = Number(e.eventTime?.seconds ?? 0) * 1000 + Math.round((e.eventTime?.nanos ?? 0) / 1e6);
    const s = e.activityTaskScheduledEventAttributes;
    if (s) scheduled.set(String(e.eventId), s.activityType?.name ?? '');
    const st = e.activityTaskStartedEventAttributes;
    if (st && scheduled.get(String(st.scheduledEventId)) === name) from = Math.min(from, at);
    const c = e.activityTaskCompletedEventAttributes;
    if (c && scheduled.get(String(c.scheduledEventId)) === name) [to, count] = [Math.max(to, at), count + 1];
  }
  return { from, to, count };
}
