/**
 * The life of a long detached job (a trainer, SpecForge's hidden-state extraction), the same
 * for every driver: launch it under the process protocol, follow its log into heartbeats,
 * re-attach when a retried activity finds it still running (never a second copy), and after
 * it ends let the driver decide — done, or another launch (from a checkpoint, or to redo bad
 * files) — within a budget of crash relaunches. What "done" means, what a relaunch looks like
 * and how the log reads are the driver's hooks.
 *
 * "Ended" means every process of the launch has ended, not just its leader: torchrun's
 * workers run in sessions of their own and outlive a torchrun killed by the OOM killer,
 * training on and saving into the same output directory. Such a launch reads 'orphans';
 * they are stopped (Host.killGroup) and reported before anything else happens, and while
 * one of them survives even KILL nothing is relaunched.
 */
import type { Host, KillResult, ProcRecord, ProcStatus } from '../../hosts/host.js';
import { followJob, latestGeneration, logTail } from './job-follow.js';
import type { FatalType } from '../../failures.js';
import type { TrainFailure } from './train-failure.js';

/** A job failure retrying cannot fix, or a crash budget spent. `type` names the failure for the workflow. */
export class JobFailure extends Error {
  constructor(
    readonly type: FatalType,
    message: string,
    readonly logTail?: string,
  ) {
    super(message);
    this.name = 'JobFailure';
  }
}

export type NextStep<T> =
  { kind: 'launch'; argv: string[]; note?: string; prepare?: () => Promise<void> } | { kind: 'done'; result: T };

export interface Ended {
  gen: number;
  record: ProcRecord;
  code: number | null;
  logTail: string;
  /** What was left running after the leader ended and has been stopped (remnantNote), if anything. */
  remnants?: string;
}

export interface JobHooks<T, P> {
  /** The first launch. */
  fresh(): Promise<NextStep<T>>;
  /** The job exited 0. */
  afterSuccess(ended: Ended): Promise<NextStep<T>>;
  /** The job died and its failure is worth another launch. */
  afterCrash(ended: Ended, failure: TrainFailure): Promise<NextStep<T>>;
  classify(logTail: string): TrainFailure;
  /** Map a non-retryable failure to the workflow's failure type. */
  failureType(failure: TrainFailure): FatalType;
  parse(chunk: string, prev: P | undefined): P;
}

export interface SuperviseOptions<P> {
  host: Host;
  /** Launch ids are `<prefix><gen>`. */
  prefix: string;
  logPath(gen: number): string;
  cwd: string;
  env: Record<string, string>;
  crashRetries: number;
  pollMs: number;
  signal?: AbortSignal;
  stopJob?: () => boolean;
  heartbeat(details: { launchId: string; pid: number; argv: string[]; progress: P | undefined; note?: string }): void;
  /** What the job is, for messages ("trainer", "prepare_hidden_states.py"). */
  what: string;
  /** Failure type when the crash budget is spent. */
  crashType: FatalType;
}

type Orphans = Extract<ProcStatus, { state: 'orphans' }>;

const plural = (n: number, one: string, many: string): string => `${n} ${n === 1 ? one : many}`;

/** "torchrun exited (code 137); 1 process in its own session still ran: stopped (TERM)". */
export function remnantNote(record: ProcRecord, status: Orphans, kill: KillResult): string {
  const leader = (record.argv[0] ?? 'the job').split('/').pop() || 'the job';
  const how = status.code === null ? 'is gone' : `exited (code ${status.code})`;
  const inGroup = status.processes - status.escaped;
  const which =
    inGroup === 0
      ? `${plural(status.escaped, 'process in its own session', 'processes in sessions of their own')}`
      : status.escaped === 0
        ? plural(inGroup, 'process of its group', 'processes of its group')
        : `${plural(status.processes, 'process', 'processes')} (${status.escaped} in a session of its own)`;
  const outcome = kill.groupEmpty
    ? `stopped${kill.signals.length ? ` (${kill.signals.join(', ')})` : ''}`
    : `still running after ${kill.signals.join(', ') || 'no signal'}`;
  return `${leader} ${how}; ${which} still ran: ${outcome}`;
}

/** Stop what outlived the leader; a launch that cannot be emptied must not get a successor. */
async function stopRemnants(host: Host, record: ProcRecord, status: Orphans, what: string): Promise<string> {
  const kill = await host.killGroup(record, { graceMs: 15_000 });
  const note = remnantNote(record, status, kill);
  if (!kill.groupEmpty)
    throw new Error(
      `${what} ${record.launchId} on ${host.name}: ${note}; not relaunching beside it (the next attempt tries again)`,
    );
  return note;
}

export async function superviseJob<T, P>(
  o: SuperviseOptions<P>,
  hooks: JobHooks<T, P>,
): Promise<{ result: T; launches: number; argv: string[] }> {
  const { host } = o;
  let lastArgv: string[] = [];
  const follow = async (record: ProcRecord): Promise<void> => {
    let progress: P | undefined;
    lastArgv = record.argv;
    await followJob(host, record, {
      pollMs: o.pollMs,
      signal: o.signal,
      stopJob: o.stopJob,
      onLog: (chunk) => (progress = hooks.parse(chunk, progress)),
      onPoll: () => o.heartbeat({ launchId: record.launchId, pid: record.pid, argv: record.argv, progress }),
    });
  };
  for (;;) {
    const latest = await latestGeneration(host, o.prefix);
    let step: NextStep<T>;
    if (!latest) step = await hooks.fresh();
    else {
      const status = await host.procStatus(latest.record);
      if (status.state === 'alive') {
        // A retried activity (the worker died): follow the running job, never start a second one.
        await follow(latest.record);
        continue;
      }
      let remnants: string | undefined;
      if (status.state === 'orphans') {
        remnants = await stopRemnants(host, latest.record, status, o.what);
        o.heartbeat({
          launchId: latest.record.launchId,
          pid: latest.record.pid,
          argv: latest.record.argv,
          progress: undefined,
          note: remnants,
        });
      }
      const code = status.state === 'exited' || status.state === 'orphans' ? status.code : null;
      const ended: Ended = {
        gen: latest.gen,
        record: latest.record,
        code,
        logTail: await logTail(host, latest.record.logPath),
        ...(remnants ? { remnants } : {}),
      };
      lastArgv = latest.record.argv;
      if (code === 0) step = await hooks.afterSuccess(ended);
      else {
        const failure = hooks.classify(ended.logTail);
        const how = `${code === null ? 'process gone' : `exit code ${code}`}${remnants ? `; ${remnants}` : ''}`;
        if (!failure.retryable)
          throw new JobFailure(
            hooks.failureType(failure),
            `${o.what} failed (${how}): ${failure.advice}`,
            ended.logTail,
          );
        if (latest.gen >= o.crashRetries) {
          throw new JobFailure(
            o.crashType,
            `${o.what} crashed ${latest.gen + 1} times (${how}); giving up after crash-retries=${o.crashRetries}. ${failure.advice}`,
            ended.logTail,
          );
        }
        step = await hooks.afterCrash(ended, failure);
      }
    }
    if (step.kind === 'done') return { result: step.result, launches: latest ? latest.gen + 1 : 0, argv: lastArgv };
    const gen = latest ? latest.gen + 1 : 0;
    await step.prepare?.();
    const spawned = await host.spawnDetached(`${o.prefix}${gen}`, step.argv, {
      env: o.env,
      cwd: o.cwd,
      logPath: o.logPath(gen),
    });
    await follow(spawned.record);
  }
}
