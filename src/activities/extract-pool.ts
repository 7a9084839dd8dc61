/**
 * The extract stage's activities for a pool of servers (stages.extract.servers, aerie's capture
 * only): the plan that writes the batch files and the merge of the batches' manifests, both on
 * the target host. Each batch is an extractHiddenStates call (extract.ts) on its server's host,
 * into hidden_states/pool/b-<n>/ on the shared filesystem: no hidden state crosses a worker.
 */
import { poolBatchSize } from '../config/pool.js';
import { combineExtractPool, planExtractPool } from '../stages/extract/index.js';
import { keepHeartbeating, runPaths, type ActivityDeps, type RunRef } from './context.js';
import { extractFailure, type ExtractOutcome } from './extract.js';

export function extractPoolActivities({ hosts }: ActivityDeps) {
  return {
    /** The regenerated samples cut into batch files, one per batch, in train.jsonl's order. */
    async planExtractPool(
      input: RunRef & { dataPath: string; servers: number },
    ): Promise<{ samples: number; batches: number; batchSize: number }> {
      const host = hosts.get(input.config);
      const stopBeat = keepHeartbeating(() => ({ phase: 'planning batches' }));
      try {
        const plan = await planExtractPool(host, input.dataPath, runPaths(host, input.runId).hidden, (n) =>
          poolBatchSize(input.config, n, input.servers, 'extract'),
        );
        return { samples: plan.samples, batches: plan.batches.length, batchSize: plan.batchSize };
      } finally {
        stopBeat();
      }
    },

    /** One manifest and error list for the pool; a batch that never finished fails it. */
    async combineExtractPool(input: RunRef): Promise<ExtractOutcome> {
      const host = hosts.get(input.config);
      const hidden = runPaths(host, input.runId).hidden;
      try {
        const s = await combineExtractPool(host, hidden);
        const c = s.counts;
        return {
          hidden: { dir: hidden, layout: 'specforge' },
          count: c.ok,
          bytes: s.totalBytes,
          outputs: [hidden],
          note:
            `${c.ok} of ${c.input} samples, ${(s.totalBytes / 2 ** 20).toFixed(1)} MiB in SpecForge's layout (aerie's capture, ${s.batches} batches)` +
            `${c.error ? `, ${c.error} errors (extract_error.jsonl)` : ''}${c.resumed ? `, ${c.resumed} from before a resume` : ''}; self-check: ${s.selfCheck}`,
        };
      } catch (err) {
        throw extractFailure(err);
      }
    },
  };
}
