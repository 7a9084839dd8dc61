/**
 * The generate stage on a pool of target servers (stages.generate.servers, pool-lanes.ts):
 * a plan on the target host, one batch activity per batch on whichever server is free (the
 * answers travel through the worker to the target host, where the batch's shards land), and a
 * merge into the same outputs a one-server run writes. History: one activity per batch, and
 * batches are sized so a 100k-sample run is a few hundred of them (config/pool.ts poolBatchSize).
 */
import type { BatchOutcome } from '../activities/generate-pool.js';
import type { GenerateOutcome } from '../activities/generate.js';
import { describePlace, type PoolPlace } from '../config/pool.js';
import { activities } from './activities.js';
import type { Run } from './context.js';
import type { StageWork } from './ledgered.js';
import { leaseOtherHosts, runPool } from './pool-lanes.js';

export async function pooledGenerate(run: Run, places: PoolPlace[]): Promise<StageWork<GenerateOutcome>> {
  const { base, options, progress } = run;
  const leases = await leaseOtherHosts(run, places, 'generate');
  try {
    const plan = await activities.planGeneratePool.executeWithOptions(
      { ...options.longRunning, summary: `generate pool: plan batches for ${places.length} servers` },
      [{ ...base, servers: places.length }],
    );
    progress.say(
      `${plan.samples} samples in ${plan.batches} batches of ${plan.batchSize} over ${places.length} servers: ${places.map(describePlace).join(', ')}`,
    );
    let resumed = plan.resumed;
    const { left } = await runPool(run, places, {
      stage: 'generate',
      role: 'generate',
      batches: plan.batches,
      runBatch: (place, srv, index) =>
        activities.generatePoolBatch.executeWithOptions(
          { ...options.longRunning, summary: `generate batch ${index} on ${describePlace(place)}` },
          [{ ...base, launch: srv, index }],
        ),
      done: (r) => (resumed += (r as BatchOutcome).resumed),
    });
    const r = await activities.combineGeneratePool.executeWithOptions(
      {
        ...options.longRunning,
        summary: `generate pool: merge ${plan.batches} batches into train.jsonl (input order)`,
      },
      [{ ...base, resumed }],
    );
    const lost = left ? `; ${left} of ${places.length} servers left the pool` : '';
    return { result: r, outputs: r.outputs, note: `${r.note} on ${places.length} servers${lost}` };
  } finally {
    for (const l of leases) await l.release();
  }
}
