/**
 * Following a detached job (trainer, hidden-state extraction, export) through the Host: read
 * its log as it grows, report progress, and return when the process is no longer alive. The
 * job itself never depends on the follower: a follower that stops (worker crash, shutdown)
 * leaves it running, and the next attempt re-attaches by its launch record.
 */
import type { Host, ProcRecord, ProcStatus } from '../../hosts/host.js';
import { sleep } from './pool.js';

export interface FollowOptions {
  pollMs: number;
  /** Each new piece of the log, in order. */
  onLog(chunk: string): void;
  /** Called once per poll, after onLog: the place to heartbeat. */
  onPoll?(): void;
  /** Stops following (the job keeps running unless stopJob says otherwise). */
  signal?: AbortSignal;
  /** On abort: should the job be stopped too? (A cancel: yes. A worker shutdown: no.) */
  stopJob?: () => boolean;
  /** Start reading the log here (a re-attach reads it again from 0 to rebuild progress). */
  offset?: number;
}

/** Follow until the process is not alive; returns its final status. */
export async function followJob(host: Host, record: ProcRecord, opts: FollowOptions): Promise<ProcStatus> {
  let offset = opts.offset ?? 0;
  for (;;) {
    // Drain what the log holds now (it may be more than one read).
    for (;;) {
      const chunk = await host.tailFrom(record.logPath, offset);
      if (chunk.data === '') break;
      offset = chunk.offset;
      opts.onLog(chunk.data);
    }
    opts.onPoll?.();
    const status = await host.procStatus(record);
    if (status.state !== 'alive') {
      // Whatever it wrote between the last read and its exit.
      for (;;) {
        const chunk = await host.tailFrom(record.logPath, offset);
        if (chunk.data === '') break;
        offset = chunk.offset;
        opts.onLog(chunk.data);
      }
      return status;
    }
    try {
      await sleep(opts.pollMs, opts.signal);
    } catch (err) {
      if (opts.stopJob?.()) await host.killGroup(record, { graceMs: 15_000 });
      throw err;
    }
  }
}

/** Highest generation among launches named `<prefix><gen>`, and its record. */
export async function latestGeneration(
  host: Host,
  prefix: string,
): Promise<{ gen: number; record: ProcRecord } | null> {
  let best: { gen: number; record: ProcRecord } | null = null;
  for (const r of await host.listLaunches()) {
    if (!r.launchId.startsWith(prefix)) continue;
    const gen = Number(r.launchId.slice(prefix.length));
    if (Number.isInteger(gen) && (!best || gen > best.gen)) best = { gen, record: r };
  }
  return best;
}

/** The last `n` lines of a log (read from its start, at most maxBytes). */
export async function logTail(host: Host, path: string, n = 50, maxBytes = 1 << 20): Promise<string> {
  const st = await host.stat(path);
  const from = st ? Math.max(0, st.size - maxBytes) : 0;
  const { data } = await host.tailFrom(path, from, maxBytes).catch(() => ({ data: '' }));
  return data
    .split(/\r?\n|\r/)
    .filter((l) => l.trim() !== '')
    .slice(-n)
    .join('\n');
}
