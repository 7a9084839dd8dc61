/**
 * Driving the real pipeline workflow (real dev server, real worker, real simulator
 * processes) into server faults, and reading back what happened: the workflow history's
 * activity events (times, failures, details), the host's launch records and exit files.
 * Shared by test/server/*.test.ts and bench/time-to-detect.ts.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkflowFailedError, type WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import type { Config } from '../../src/config/schema.js';
import { HostPool } from '../../src/hosts/index.js';
import { TASK_QUEUE, type PipelineInput, type PipelineResult, type RunStatus } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { createWorker } from '../../src/worker.js';
import { demoConfig } from '../support/demo-config.js';
import type { TestTemporal } from '../support/temporal.js';

type Proto = Record<string, any>;

export interface ActivityFailureInfo {
  message: string;
  type?: string;
  nonRetryable?: boolean;
  details?: Record<string, any>;
}

/** One scheduled activity, as the history tells it (retries appear only as the final attempt). */
export interface ActivityRun {
  type: string;
  summary?: string;
  input?: any;
  scheduledAt: number;
  attempt?: number;
  closedAt?: number;
  outcome?: 'completed' | 'failed' | 'timed-out' | 'canceled';
  result?: any;
  failure?: ActivityFailureInfo;
}

export interface RunOutcome {
  runId: string;
  result?: PipelineResult;
  /** The workflow's failure message (the run's StageFailed) when it did not complete. */
  error?: string;
  cancelled: boolean;
  activities: ActivityRun[];
  startedAt: number;
  closedAt: number;
}

function tsMs(ts: Proto | null | undefined): number {
  if (!ts) return NaN;
  return Number(ts.seconds?.toString() ?? 0) * 1000 + Math.round((ts.nanos ?? 0) / 1e6);
}

function decode(payloads: Proto | null | undefined): any[] {
  return (payloads?.payloads ?? []).map((p: Proto) => defaultPayloadConverter.fromPayload(p));
}

function failureOf(f: Proto | null | undefined): ActivityFailureInfo | undefined {
  if (!f) return undefined;
  // The activity's own ApplicationFailure is the failure itself, or its cause under a timeout/wrapper.
  let cur: Proto | null | undefined = f;
  while (cur && !cur.applicationFailureInfo && cur.cause) cur = cur.cause;
  const app = cur?.applicationFailureInfo;
  return {
    message: cur?.message ?? f.message ?? '',
    type: app?.type ?? undefined,
    nonRetryable: app?.nonRetryable ?? undefined,
    details: app?.details ? decode(app.details)[0] : undefined,
  };
}

/** Every activity of a workflow run, in scheduling order. */
export async function activityRuns(handle: WorkflowHandle): Promise<ActivityRun[]> {
  const history = await handle.fetchHistory();
  const byId = new Map<string, ActivityRun>();
  const runs: ActivityRun[] = [];
  for (const e of (history.events ?? []) as Proto[]) {
    const at = tsMs(e.eventTime);
    const s = e.activityTaskScheduledEventAttributes;
    if (s) {
      const summary = e.userMetadata?.summary ? defaultPayloadConverter.fromPayload(e.userMetadata.summary) : undefined;
      const run: ActivityRun = {
        type: s.activityType?.name ?? '',
        summary: summary as string | undefined,
        input: decode(s.input)[0],
        scheduledAt: at,
      };
      byId.set(String(e.eventId), run);
      runs.push(run);
      continue;
    }
    const started = e.activityTaskStartedEventAttributes;
    if (started) {
      const run = byId.get(String(started.scheduledEventId));
      if (run) run.attempt = started.attempt ?? undefined;
      continue;
    }
    const done = e.activityTaskCompletedEventAttributes;
    const failed = e.activityTaskFailedEventAttributes;
    const timedOut = e.activityTaskTimedOutEventAttributes;
    const canceled = e.activityTaskCanceledEventAttributes;
    const closing = done ?? failed ?? timedOut ?? canceled;
    if (closing) {
      const run = byId.get(String(closing.scheduledEventId));
      if (!run) continue;
      run.closedAt = at;
      if (done) {
        run.outcome = 'completed';
        run.result = decode(done.result)[0];
      } else if (failed) {
        run.outcome = 'failed';
        run.failure = failureOf(failed.failure);
      } else if (timedOut) {
        run.outcome = 'timed-out';
        run.failure = failureOf(timedOut.failure);
      } else run.outcome = 'canceled';
    }
  }
  return runs;
}

export interface RunOptions {
  /** Cancel the run once its status satisfies this (cuts a pipeline short after the stage under test). */
  cancelWhen?: (status: RunStatus) => boolean;
  /** Called once the workflow has started, while the worker runs (for tests that act during a run). */
  during?: (handle: WorkflowHandle) => Promise<void>;
}

/** One pipeline run on a fresh in-process worker; resolves when the workflow closes. */
export async function runPipeline(
  t: TestTemporal,
  config: Config,
  runId: string,
  opts: RunOptions = {},
): Promise<RunOutcome> {
  const hosts = new HostPool();
  const { worker } = await createWorker({
    connection: t.nativeConnection,
    workflowBundle: t.bundle,
    hosts,
    taskQueue: TASK_QUEUE,
  });
  const input: PipelineInput = { runId, config, configPath: 'test' };
  const startedAt = Date.now();
  let cancelled = false;
  try {
    return await worker.runUntil(async () => {
      const handle = await t.client.workflow.start(pipeline, {
        taskQueue: TASK_QUEUE,
        workflowId: runId,
        args: [input],
      });
      const watcher = opts.cancelWhen ? cancelWhen(handle, opts.cancelWhen, () => (cancelled = true)) : undefined;
      if (opts.during) await opts.during(handle);
      let result: PipelineResult | undefined;
      let error: string | undefined;
      try {
        result = (await handle.result()) as PipelineResult;
      } catch (err) {
        error = runFailureMessage(err);
      }
      await watcher?.stop();
      return {
        runId,
        result,
        error,
        cancelled,
        activities: await activityRuns(handle),
        startedAt,
        closedAt: Date.now(),
      };
    });
  } finally {
    await hosts.closeAll();
  }
}

function cancelWhen(
  handle: WorkflowHandle,
  cond: (s: RunStatus) => boolean,
  onCancel: () => void,
): { stop(): Promise<void> } {
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const status = await handle.query<RunStatus>('status').catch(() => undefined);
      if (status && cond(status)) {
        onCancel();
        await handle.cancel().catch(() => undefined);
        return;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
    },
  };
}

/** The run's own failure (StageFailed: "<stage> failed: <what the activity said>"). */
function runFailureMessage(err: unknown): string {
  if (!(err instanceof WorkflowFailedError)) return String((err as Error)?.message ?? err);
  return err.cause?.message ?? err.message;
}

export function only(runs: ActivityRun[], type: string): ActivityRun[] {
  return runs.filter((r) => r.type === type);
}

/** Launch ids with a record on the host (what aerie launched, ever). */
export async function launchRecords(workdir: string): Promise<string[]> {
  const files = await readdir(join(workdir, '.aerie', 'procs')).catch(() => [] as string[]);
  return files
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -5))
    .sort();
}

export async function launchRecord(
  workdir: string,
  launchId: string,
): Promise<{ pid: number; pgid: number; startedAt: string; argv: string[]; logPath: string }> {
  return JSON.parse(await readFile(join(workdir, '.aerie', 'procs', `${launchId}.json`), 'utf8'));
}

/** When the launch wrapper recorded the server's exit (the .exit file is written the moment it ends). */
export async function exitedAt(workdir: string, launchId: string): Promise<{ at: number; code: number } | undefined> {
  const path = join(workdir, '.aerie', 'procs', `${launchId}.exit`);
  const s = await stat(path).catch(() => undefined);
  if (!s) return undefined;
  return { at: s.mtimeMs, code: Number((await readFile(path, 'utf8')).trim()) };
}

/** true when some live process is still in the process group (read from /proc). */
export async function groupHasMembers(pgid: number): Promise<boolean> {
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const text = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    const close = text.lastIndexOf(')');
    if (close < 0) continue;
    const fields = text.slice(close + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z') return true;
  }
  return false;
}

/**
 * Time from each server's exit to the failure of the activity that was waiting on it:
 * pairs every failed activity whose input names a launch with that launch's .exit time.
 */
export async function detectionDelays(
  workdir: string,
  runs: ActivityRun[],
  types: string[],
): Promise<{ launchId: string; type: string; delayMs: number }[]> {
  const out: { launchId: string; type: string; delayMs: number }[] = [];
  for (const r of runs) {
    if (!types.includes(r.type) || r.outcome !== 'failed' || r.closedAt === undefined) continue;
    const launchId = r.input?.launch?.launchId as string | undefined;
    if (!launchId) continue;
    const exit = await exitedAt(workdir, launchId);
    if (exit) out.push({ launchId, type: r.type, delayMs: r.closedAt - exit.at });
  }
  return out;
}

export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The demo pipeline on its own workdir and port, with faults and timings set through server config. */
export function faultConfig(
  workdir: string,
  port: number,
  env: Record<string, string>,
  tweak: (c: Config) => void = () => undefined,
): Config {
  return demoConfig(workdir, port, (c) => {
    c.server.env = { ...c.server.env, ...env };
    c.server.readiness['poll-interval'] = 1000;
    c.server.readiness.budget = 60_000;
    tweak(c);
  });
}
