/**
 * The extract stage (aerie's capture) on a pool of servers (stages.extract.servers,
 * pool-lanes.ts): the plan writes batch files on the target host, each batch is a whole
 * extraction on its server's host, into the target's run folder through the filesystem they
 * share (never through the worker: on that host's task queue), and the merge sums the batches.
 */
import type { ExtractOutcome } from '../activities/extract.js';
import { describePlace, type PoolPlace } from '../config/pool.js';
import { activities } from './activities.js';
import type { Run } from './context.js';
import type { StageWork } from './ledgered.js';
import { leaseOtherHosts, placeRun, runPool } from './pool-lanes.js';

export async function pooledExtract(
  run: Run,
  places: PoolPlace[],
  dataPath: string,
  space: string,
): Promise<StageWork<ExtractOutcome>> {
  const { base, options, progress } = run;
  const leases = await leaseOtherHosts(run, places, 'extract');
  try {
    const plan = await activities.planExtractPool.executeWithOptions(
      { ...options.longRunning, summary: `extract pool: batch files for ${places.length} servers` },
      [{ ...base, dataPath, servers: places.length }],
    );
    progress.say(
      `${plan.samples} samples in ${plan.batches} batches of ${plan.batchSize} over ${places.length} servers: ${places.map(describePlace).join(', ')}`,
    );
    const { left } = await runPool(run, places, {
      stage: 'extract',
      role: 'extract',
      batches: plan.batches,
      runBatch: (place, srv, index) => {
        const at = placeRun(run, place, 'extract');
        return activities.extractHiddenStates.executeWithOptions(
          {
            ...at.options.longRunning,
            summary: `extract batch ${index} on ${describePlace(place)} (aerie's capture; ${space})`,
          },
          [{ ...at.base, launch: srv, dataPath, batch: index }],
        );
      },
    });
    const r = await activities.combineExtractPool.executeWithOptions(
      { ...options.longRunning, summary: `extract pool: one manifest for ${plan.batches} batches` },
      [base],
    );
    const lost = left ? `; ${left} of ${places.length} servers left the pool` : '';
    return { result: r, outputs: r.outputs, note: `${r.note} on ${places.length} servers${lost}` };
  } finally {
    for (const l of leases) await l.release();
  }
}
