/** stages.generate: regenerating the assistant turns with the target. */
import { z } from 'zod';
import { nonEmpty } from './fields.js';

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
});
