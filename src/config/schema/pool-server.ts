/** A stage's pool of target servers: where each runs. Shared by stages.generate and stages.extract. */
import { z } from 'zod';
import { nonEmpty, port } from './fields.js';

/**
 * One target server of a stage's pool (generate, or extract with aerie's capture): a host (default the target host), a GPU subset of it
 * and a port of its own. Every pool server pulls the next batch of samples as it frees up.
 */
export const poolServerSchema = z.strictObject({
  host: nonEmpty
    .optional()
    .describe(
      "A name from hosts; default target.host. The worker that runs the target host's activities must reach it (its HTTP is forwarded like the target's).",
    ),
  gpus: z
    .array(z.number().int().min(0))
    .min(1)
    .refine((a) => new Set(a).size === a.length, 'lists a GPU twice')
    .optional()
    .describe("GPU indices of that host this server uses (CUDA_VISIBLE_DEVICES); default the host's gpus, else all."),
  port: port.optional().describe('Default server.port; two servers on one host need two ports.'),
});
