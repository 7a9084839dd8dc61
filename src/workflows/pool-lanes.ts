/**
 * A stage's pool of servers (stages.<generate|extract>.servers), from the workflow's side: one
 * server per place (a host, or a GPU subset of one), each launched, ready and smoke-tested as
 * a lone server is, each taking the next batch as it frees up. A server that dies hands its
 * batch back to the front of the queue (a batch resumes by sample id wherever it runs next)
 * and is relaunched, a few times; the others go on. The stage fails only when batches remain
 * and no server is left. Servers on hosts other than the target hold those hosts' GPUs first.
 */
import { CancellationScope, condition, isCancellation } from '@temporalio/workflow';
import type { ServerLaunch, ServerRole } from '../activities/server.js';
import { describePlace, placeConfig, type PoolPlace, type PoolStage } from '../config/pool.js';
import { heartbeatingActivities, hostTaskQueue } from './activities.js';
import type { Run } from './context.js';
import { failureMessage } from './failure.js';
import { leaseGpus, type HeldLease } from './leases.js';
import { relaunchable, Servers } from './servers.js';

/** How many times one place's server may die in use before the place leaves the pool. */
const DEATHS_PER_PLACE = 3;

export interface PoolJob {
  stage: PoolStage;
  role: ServerRole;
  batches: number;
  /** One batch on one place's server; what it returns is handed to `done`. */
  runBatch(place: PoolPlace, srv: ServerLaunch, index: number): Promise<unknown>;
  done?(result: unknown): void;
}

/** Every batch done on some server, or throws what stopped the last server; the failures of servers that left. */
export async function runPool(run: Run, places: PoolPlace[], job: PoolJob): Promise<{ left: number }> {
  const queue: BatchQueue = { waiting: Array.from({ length: job.batches }, (_, i) => i), running: 0 };
  const failures: unknown[] = [];
  let done = 0;
  // A cancel reaches every lane; each stops its own server on the way out.
  await Promise.all(
    places.map((place) =>
      lane(run, place, queue, job, (r) => {
        job.done?.(r);
        // The board only (a query's state, no command): how far the pool has come.
        run.progress.say(`${++done} of ${job.batches} batches done on ${places.length} servers`);
      }).catch((err: unknown) => {
        if (isCancellation(err)) throw err;
        failures.push(err);
        run.progress.say(
          `${job.stage} server ${describePlace(place)} left the pool: ${failureMessage(err).slice(0, 200)}`,
        );
      }),
    ),
  );
  if (queue.waiting.length > 0)
    throw failures[0] ?? new Error(`${job.stage} pool: ${queue.waiting.length} batches left and no server`);
  return { left: failures.length };
}

/** The batches not yet done, and how many are running: a batch that fails comes back to the queue. */
interface BatchQueue {
  waiting: number[];
  running: number;
}

/**
 * One place's server, taking the next batch while any wait. It leaves only once none wait and
 * none run (a running batch may yet come back), or when its server has died too often.
 */
async function lane(run: Run, place: PoolPlace, queue: BatchQueue, job: PoolJob, done: (r: unknown) => void) {
  const servers = new Servers(placeRun(run, place, job.stage));
  servers.sglang = run.servers.sglang;
  let srv: ServerLaunch | undefined;
  let deaths = 0;
  try {
    for (;;) {
      await condition(() => queue.waiting.length > 0 || queue.running === 0);
      if (queue.waiting.length === 0) return;
      // Taken before the launch awaits, so two servers never wait for the same last batch.
      const index = queue.waiting.shift()!;
      queue.running++;
      try {
        // A server that cannot be started (Servers.start has relaunched it already) leaves the pool.
        srv ??= await servers.start(job.role, { slot: `s${place.index}` }).catch((err: unknown) => {
          queue.waiting.unshift(index);
          throw err;
        });
        try {
          done(await job.runBatch(place, srv, index));
        } catch (err) {
          // Back to the front: the next free server resumes it from what it saved.
          queue.waiting.unshift(index);
          if (isCancellation(err) || !relaunchable(err) || ++deaths >= DEATHS_PER_PLACE) throw err;
          run.progress.say(
            `${job.stage} server ${describePlace(place)} died (${failureMessage(err).slice(0, 160)}); its batch went back to the pool; relaunching`,
          );
          const dead = srv;
          srv = undefined;
          await CancellationScope.nonCancellable(() => servers.stop(dead));
        }
      } finally {
        queue.running--;
      }
    }
  } finally {
    const last = srv;
    if (last) await CancellationScope.nonCancellable(() => servers.stop(last));
  }
}

/** The run as one pool server sees it: that place as its target, on that host's task queue. */
export function placeRun(run: Run, place: PoolPlace, stage: PoolStage) {
  const config = placeConfig(run.config, place, stage);
  return {
    base: { ...run.base, config },
    config,
    options: heartbeatingActivities(config.run['heartbeat-timeout'], hostTaskQueue(config), run.waitForCleanup),
    pipelineOptions: run.pipelineOptions,
    progress: run.progress,
    target: describePlace(place),
  };
}

/**
 * The run already holds its target host's GPUs; a pool server elsewhere waits for that host's
 * (the union of the GPUs its places use) like any run would. Release them after the stage.
 */
export async function leaseOtherHosts(run: Run, places: PoolPlace[], stage: PoolStage): Promise<HeldLease[]> {
  const held: HeldLease[] = [];
  const hosts = [...new Set(places.map((p) => p.host))].filter((h) => h !== run.config.target.host);
  try {
    for (const host of hosts) {
      const mine = places.filter((p) => p.host === host);
      const gpus = mine.some((p) => !p.gpus)
        ? undefined
        : [...new Set(mine.flatMap((p) => p.gpus!))].sort((a, b) => a - b);
      const all: PoolPlace = { index: -1, host, port: run.config.server.port, ...(gpus ? { gpus } : {}) };
      const lease = await leaseGpus(placeRun(run, all, stage), stage);
      if (lease) held.push(lease);
    }
  } catch (err) {
    for (const l of held) await l.release();
    throw err;
  }
  return held;
}
