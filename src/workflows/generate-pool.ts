/**
 * The generate stage on a pool of target servers (stages.generate.servers): one server per
 * place (a host, or GPU subset of one), each launched, ready and smoke-tested as the one-server
 * stage's is, each pulling the next batch as it frees up. A server that dies hands its batch
 * back to the front of the queue (the batch resumes by sample id wherever it runs next) and is
 * relaunched, a few times; the others go on. The stage fails only when no server is left with
 * work remaining. History: one activity per batch, and batches are sized so a 100k-sample run
 * is a few hundred of them (config/pool.ts poolBatchSize).
 */
import { CancellationScope, condition, isCancellation } from '@temporalio/workflow';
import type { GenerateOutcome } from '../activities/generate.js';
import type { ServerLaunch } from '../activities/server.js';
import { describePlace, placeConfig, type PoolPlace } from '../config/pool.js';
import { activities, heartbeatingActivities, hostTaskQueue } from './activities.js';
import type { Run } from './context.js';
import { failureMessage } from './failure.js';
import type { StageWork } from './ledgered.js';
import { leaseGpus, type HeldLease } from './leases.js';
import { relaunchable, Servers } from './servers.js';

/** How many times one place's server may die in use before the place leaves the pool. */
const DEATHS_PER_PLACE = 3;

export async function pooledGenerate(run: Run, places: PoolPlace[]): Promise<StageWork<GenerateOutcome>> {
  const { base, config, options, progress } = run;
  const leases = await leaseOtherHosts(run, places);
  try {
    const plan = await activities.planGeneratePool.executeWithOptions(
      { ...options.longRunning, summary: `generate pool: plan batches for ${places.length} servers` },
      [{ ...base, servers: places.length }],
    );
    progress.say(
      `${plan.samples} samples in ${plan.batches} batches of ${plan.batchSize} over ${places.length} servers: ${places.map(describePlace).join(', ')}`,
    );
    const queue: BatchQueue = { waiting: Array.from({ length: plan.batches }, (_, i) => i), running: 0 };
    let resumed = plan.resumed;
    let done = 0;
    const failures: unknown[] = [];
    // A cancel reaches every lane; each stops its own server on the way out.
    await Promise.all(
      places.map((place) =>
        lane(run, place, queue, (r) => {
          resumed += r;
          // The board only (a query's state, no command): how far the pool has come.
          progress.say(`${++done} of ${plan.batches} batches done on ${places.length} servers`);
        }).catch((err: unknown) => {
          if (isCancellation(err)) throw err;
          failures.push(err);
          progress.say(`generate server ${describePlace(place)} left the pool: ${failureMessage(err).slice(0, 200)}`);
        }),
      ),
    );
    if (queue.waiting.length > 0)
      throw failures[0] ?? new Error(`generate pool: ${queue.waiting.length} batches left and no server`);
    const r = await activities.combineGeneratePool.executeWithOptions(
      {
        ...options.longRunning,
        summary: `generate pool: merge ${plan.batches} batches into train.jsonl (input order)`,
      },
      [{ ...base, resumed }],
    );
    const lost = failures.length ? `; ${failures.length} of ${places.length} servers left the pool` : '';
    return { result: r, outputs: r.outputs, note: `${r.note} on ${places.length} servers${lost}` };
  } finally {
    for (const l of leases) await l.release();
  }
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
async function lane(run: Run, place: PoolPlace, queue: BatchQueue, onResumed: (n: number) => void): Promise<void> {
  const servers = new Servers(placeRun(run, place));
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
        srv ??= await servers.start('generate', { slot: `s${place.index}` }).catch((err: unknown) => {
          queue.waiting.unshift(index);
          throw err;
        });
        try {
          const r = await activities.generatePoolBatch.executeWithOptions(
            { ...run.options.longRunning, summary: `generate batch ${index} on ${describePlace(place)}` },
            [{ ...run.base, launch: srv, index }],
          );
          onResumed(r.resumed);
        } catch (err) {
          // Back to the front: the next free server resumes it from what it saved.
          queue.waiting.unshift(index);
          if (isCancellation(err) || !relaunchable(err) || ++deaths >= DEATHS_PER_PLACE) throw err;
          run.progress.say(
            `generate server ${describePlace(place)} died (${failureMessage(err).slice(0, 160)}); its batch went back to the pool; relaunching`,
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
function placeRun(run: Run, place: PoolPlace) {
  const config = placeConfig(run.config, place);
  return {
    base: { ...run.base, config },
    config,
    options: heartbeatingActivities(config.run['heartbeat-timeout'], hostTaskQueue(config)),
    pipelineOptions: run.pipelineOptions,
    progress: run.progress,
    target: describePlace(place),
  };
}

/**
 * The run already holds its target host's GPUs; a pool server elsewhere waits for that host's
 * (the union of the GPUs its places use) like any run would, and gives them back after the stage.
 */
async function leaseOtherHosts(run: Run, places: PoolPlace[]): Promise<HeldLease[]> {
  const held: HeldLease[] = [];
  const hosts = [...new Set(places.map((p) => p.host))].filter((h) => h !== run.config.target.host);
  try {
    for (const host of hosts) {
      const mine = places.filter((p) => p.host === host);
      const gpus = mine.some((p) => !p.gpus)
        ? undefined
        : [...new Set(mine.flatMap((p) => p.gpus!))].sort((a, b) => a - b);
      const lease = await leaseGpus(
        placeRun(run, { index: -1, host, port: run.config.server.port, ...(gpus ? { gpus } : {}) }),
        'generate',
      );
      if (lease) held.push(lease);
    }
  } catch (err) {
    for (const l of held) await l.release();
    throw err;
  }
  return held;
}
