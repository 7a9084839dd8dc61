/**
 * The generate stage's activities for a pool of target servers (stages.generate.servers): the
 * plan, one batch on one server, and the merge. All three write on the target host, the one
 * that trains; a batch's requests go to its server's host through the worker (regenerated
 * text is small), watched the whole time so a server that dies fails the batch at once and
 * the workflow hands it to another server.
 */
import { poolBatchSize } from '../config/pool.js';
import { combinePool, planPool, runBatch, type BatchOutcome, type PoolPlanSummary } from '../stages/generate/index.js';
import type { GenerateJob } from '../stages/generate/index.js';
import { keepHeartbeating, type ActivityDeps, type RunRef } from './context.js';
import { generateFailure, generateJob, generateOutcome, type GenerateOutcome } from './generate.js';
import type { ServerLaunch } from './server-types.js';
import { whileServerLives } from './server-watch.js';

export type { BatchOutcome, PoolPlanSummary };

export function generatePoolActivities({ hosts }: ActivityDeps) {
  const jobOf = (input: RunRef, baseUrl = ''): GenerateJob => generateJob(hosts.get(input.config), input, baseUrl);

  return {
    /** Rejects, skips and errors recorded; the samples cut into batches of about equal size. */
    async planGeneratePool(input: RunRef & { servers: number }): Promise<PoolPlanSummary> {
      const stopBeat = keepHeartbeating(() => ({ phase: 'planning batches' }));
      try {
        return await planPool(jobOf(input), (total) => poolBatchSize(input.config, total, input.servers));
      } catch (err) {
        throw generateFailure(err);
      } finally {
        stopBeat();
      }
    },

    /** One batch on one pool server (launch.host names its host); what it writes lands on the target host. */
    async generatePoolBatch(input: RunRef & { launch: ServerLaunch; index: number }): Promise<BatchOutcome> {
      const { config, launch, index } = input;
      const serverHost = hosts.get(config, launch.host);
      let progress: unknown = { phase: 'starting', batch: index, server: `${launch.host}:${launch.port}` };
      const stopBeat = keepHeartbeating(() => progress);
      try {
        return await whileServerLives(serverHost, launch, async (signal) =>
          runBatch(
            {
              ...jobOf(input, await serverHost.httpBase(launch.port)),
              signal,
              onProgress: (p) => (progress = { ...p, batch: index, server: `${launch.host}:${launch.port}` }),
            },
            index,
          ),
        );
      } catch (err) {
        throw generateFailure(err);
      } finally {
        stopBeat();
      }
    },

    /** Every shard merged into train.jsonl and its siblings, in input order, with the manifest. */
    async combineGeneratePool(input: RunRef & { resumed: number }): Promise<GenerateOutcome> {
      const job = jobOf(input);
      const stopBeat = keepHeartbeating(() => ({ phase: 'merging shards' }));
      try {
        return generateOutcome(job.outDir, await combinePool(job, input.resumed));
      } catch (err) {
        throw generateFailure(err);
      } finally {
        stopBeat();
      }
    },
  };
}
