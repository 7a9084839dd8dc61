/** stages.generate: regenerating the assistant turns with the target. */
import { z } from 'zod';
import { nonEmpty } from './fields.js';
import { poolServerSchema } from './pool-server.js';

export const generateSchema = z.strictObject({
  input: nonEmpty.describe('Prompts on the host: SpecForge conversations jsonl or ShareGPT jsonl.'),
  temperature: z.number().min(0).max(2).default(0.7),
  'max-tokens': z.number().int().min(1).default(2048),
  concurrency: z.number().int().min(1).max(4096).default(64),
  'num-samples': z.number().int().min(1).optional(),
  'request-retries': z.number().int().min(0).max(10).default(3),
  'shard-size': z
    .number()
    .int()
    .min(1)
    .max(100_000)
    .default(256)
    .describe(
      'Finished rows per shard file: the most a crash can lose is one unwritten shard (and at most 10 s of work).',
    ),
  servers: z
    .array(poolServerSchema)
    .min(1)
    .max(64)
    .optional()
    .describe(
      'A pool of target servers for this stage (several hosts, or GPU subsets of one): each pulls the next batch as it frees up, a dead one gives its batch back and is relaunched. concurrency is per server. Default: one server on the target host. The output (on the target host) is the same whatever the pool.',
    ),
  'batch-size': z
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .optional()
    .describe(
      'Samples a pool server takes at a time (with servers only). Default max(8 × concurrency, samples ÷ (16 × servers)): small enough that the last batches even out, large enough that a 100k-sample history stays small.',
    ),
});
