/**
 * The run configuration: one YAML file. Keys are kebab-case, like the SGLang and
 * SpecForge flags they map onto, so a researcher can copy a flag name into the file.
 * Every object is strict: an unknown key is an error, never silently ignored.
 * Each section's fields live in schema/<section>.ts; this file composes them into the file's
 * shape and is the one way in, so importers never learn where a section lives.
 */
import { z } from 'zod';
import { benchmarkSchema } from './schema/benchmark.js';
import { deploySchema } from './schema/deploy.js';
import { extractSchema } from './schema/extract.js';
import { nonEmpty } from './schema/fields.js';
import { generateSchema } from './schema/generate.js';
import { hostSchema } from './schema/hosts.js';
import { runSchema } from './schema/run.js';
import { serverSchema } from './schema/server.js';
import { trainSchema } from './schema/train.js';

export { benchmarkSchema } from './schema/benchmark.js';
export { crossFieldProblems } from './schema/cross-field.js';
export { deploySchema, SPECULATIVE_ALGORITHMS, type SpeculativeAlgorithm } from './schema/deploy.js';
export {
  defaultExtractDriver,
  extractSchema,
  patchedServerExtractSchema,
  specforgeOfflineExtractSchema,
  stockServerExtractSchema,
  type PatchedServerExtract,
  type SpecforgeOfflineExtract,
} from './schema/extract.js';
export { duration } from './schema/fields.js';
export { generateSchema } from './schema/generate.js';
export { hostSchema, localHostSchema, sshHostSchema, sshTargetSchema } from './schema/hosts.js';
export { readinessSchema, serverSchema } from './schema/server.js';
export {
  commandTrainSchema,
  refusedOverride,
  SPECFORGE_MANAGED_KEYS,
  specforgeTrainSchema,
  specforgeV02TrainSchema,
  trainSchema,
  type CommandTrain,
  type SpecforgeTrain,
  type SpecforgeV02Train,
} from './schema/train.js';

export const configSchema = z.strictObject({
  run: runSchema.prefault({}),
  hosts: z.record(z.string().regex(/^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/, 'a host name'), hostSchema),
  target: z.strictObject({
    'model-path': nonEmpty.describe('Target model directory on the host.'),
    host: nonEmpty.describe('Which entry of hosts runs the target and the drafter.'),
  }),
  server: serverSchema.prefault({}),
  stages: z.strictObject({
    generate: generateSchema,
    extract: extractSchema,
    train: trainSchema,
    deploy: deploySchema.prefault({}),
    benchmark: benchmarkSchema.prefault({}),
  }),
});

export type ConfigInput = z.input<typeof configSchema>;
export type Config = z.output<typeof configSchema>;
export type HostConfig = Config['hosts'][string];
export type ServerConfig = Config['server'];
export type GenerateConfig = Config['stages']['generate'];
export type ExtractConfig = Config['stages']['extract'];
export type TrainConfig = Config['stages']['train'];
export type DeployConfig = Config['stages']['deploy'];
export type BenchmarkConfig = Config['stages']['benchmark'];
