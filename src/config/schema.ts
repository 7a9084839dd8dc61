/**
 * The run configuration: one YAML file. Keys are kebab-case, like the SGLang and
 * SpecForge flags they map onto, so a researcher can copy a flag name into the file.
 * Every object is strict: an unknown key is an error, never silently ignored.
 */
import { z } from 'zod';

/** "2s", "500ms", "20m", "1h" or a number of seconds → milliseconds. */
export const duration = z
  .union([z.number().nonnegative(), z.string().regex(/^\d+(\.\d+)?(ms|s|m|h)$/, 'a duration like "2s", "500ms", "20m" or "1h"')])
  .transform((v) => {
    if (typeof v === 'number') return Math.round(v * 1000);
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(v)!;
    const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as 'ms' | 's' | 'm' | 'h'];
    return Math.round(Number(m[1]) * unit);
  });

const nonEmpty = z.string().min(1, 'a non-empty string');
const argv = z.array(nonEmpty).min(1, 'at least one element (the program to run)');
const envMap = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'), z.string());
const port = z.number().int().min(1).max(65535);

export const SPECULATIVE_ALGORITHMS = ['EAGLE', 'EAGLE3', 'NEXTN', 'STANDALONE', 'NGRAM'] as const;

export const hostSchema = z.strictObject({
  kind: z.literal('local').describe('Where the GPU work runs. "local": this machine (SSH hosts arrive with kind "ssh").'),
  workdir: nonEmpty.describe('Absolute directory on the host for run folders, process records and ledgers.'),
});

export const readinessSchema = z.strictObject({
  endpoint: z.enum(['/health', '/health_generate']).default('/health'),
  'poll-interval': duration.default(2000),
  budget: duration.default(20 * 60_000).describe('How long a model load may take before the launch fails.'),
  'smoke-tokens': z.number().int().min(1).max(64).default(8),
});

export const serverSchema = z.strictObject({
  launcher: argv
    .default(['python3', '-m', 'sglang.launch_server'])
    .describe('argv that starts an SGLang server; aerie appends --model-path, --port and the rest.'),
  port: port.default(30000),
  'tp-size': z.number().int().min(1).default(1),
  'mem-fraction-static': z.number().gt(0).lt(1).optional(),
  env: envMap.default({}).describe('Extra environment. ${VAR} is expanded on the worker at launch time, so secrets never enter workflow history.'),
  'extra-args': z.array(z.string()).default([]),
  readiness: readinessSchema.prefault({}),
});

export const generateSchema = z.strictObject({
  input: nonEmpty.describe('Prompts on the host: SpecForge conversations jsonl or ShareGPT jsonl.'),
  temperature: z.number().min(0).max(2).default(0.7),
  'max-tokens': z.number().int().min(1).default(2048),
  concurrency: z.number().int().min(1).max(4096).default(64),
  'num-samples': z.number().int().min(1).optional(),
  'request-retries': z.number().int().min(0).max(10).default(3),
});

export const extractSchema = z.strictObject({
  driver: z.literal('patched-server').default('patched-server'),
  'dump-env': z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).default('SGLANG_HS_DUMP_DIR'),
  'dump-dir': nonEmpty.describe('RAM-backed directory the patched server dumps into (e.g. /dev/shm/sglang_hs).'),
  'hidden-size': z.number().int().min(1).optional().describe("Target hidden size; read from the model's config.json when absent."),
  concurrency: z.number().int().min(1).default(8),
});

export const trainSchema = z.strictObject({
  driver: z.enum(['specforge-v0.2']).default('specforge-v0.2'),
  launcher: argv
    .default(['torchrun', '--standalone', '--nproc_per_node', '8', 'scripts/train_eagle3.py'])
    .describe('argv that starts the trainer; aerie appends the SpecForge flags.'),
  'draft-model-config': nonEmpty.describe('EAGLE-3 draft config.json on the host.'),
  'chat-template': z.string().default('llama3'),
  'num-epochs': z.number().int().min(1).default(2),
  'batch-size': z.number().int().min(1).default(1),
  'learning-rate': z.number().positive().default(1e-4),
  'max-length': z.number().int().min(16).default(2048),
  'ttt-length': z.number().int().min(1).default(7),
  'save-interval': z.number().int().min(1).default(500),
  'tp-size': z.number().int().min(1).default(1),
  env: envMap.default({}),
  'extra-args': z.array(z.string()).default([]),
  'crash-retries': z.number().int().min(0).max(20).default(3).describe('Relaunches from the latest checkpoint after a trainer crash.'),
});

export const deploySchema = z.strictObject({
  'speculative-algorithm': z.enum(SPECULATIVE_ALGORITHMS).default('EAGLE3'),
  'draft-model-path': z.string().optional().describe('Serve this drafter instead of the one the train stage produces.'),
  'num-steps': z.number().int().min(1).optional(),
  'eagle-topk': z.number().int().min(1).optional(),
  'num-draft-tokens': z.number().int().min(1).optional(),
  'max-running-requests': z.number().int().min(1).optional(),
  'acceptance-threshold': z.number().min(1).default(1.3),
  'acceptance-requests': z.number().int().min(1).default(4),
});

export const benchmarkSchema = z.strictObject({
  concurrencies: z.array(z.number().int().min(1)).min(1).default([1, 2, 5, 10, 30, 70, 100, 250]),
  'prompts-per-level': z.number().int().min(1).optional().describe('Requests per level; default max(16, 2 × concurrency).'),
  'output-len': z.number().int().min(1).default(256),
  'input-len': z.number().int().min(1).default(256).describe('Prompt length in words for generated prompts.'),
  warmup: z.number().int().min(0).default(1),
  api: z.enum(['generate', 'chat']).default('generate'),
  baseline: z.boolean().default(true).describe('Also benchmark the target alone, for the speedup column.'),
  seed: z.number().int().default(1),
});

export const configSchema = z.strictObject({
    run: z
      .strictObject({
        label: z.string().regex(/^[a-z0-9][a-z0-9-]{0,40}$/, 'lowercase letters, digits and dashes').default('run'),
      })
      .prefault({}),
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

/**
 * Checks that span fields. They run on the raw (unvalidated) document so they are reported
 * together with every field error, not only once the rest of the file is fixed.
 */
export function crossFieldProblems(raw: unknown): { path: string[]; message: string }[] {
  const out: { path: string[]; message: string }[] = [];
  const doc = (raw ?? {}) as Record<string, any>;
  const hosts = doc.hosts && typeof doc.hosts === 'object' ? (doc.hosts as Record<string, any>) : {};
  const targetHost = doc.target?.host;
  if (typeof targetHost === 'string' && !(targetHost in hosts)) {
    out.push({
      path: ['target', 'host'],
      message: `names no host: "${targetHost}" is not one of hosts (${Object.keys(hosts).join(', ') || 'none defined'})`,
    });
  }
  for (const [name, h] of Object.entries(hosts)) {
    if (typeof h?.workdir === 'string' && !h.workdir.startsWith('/')) {
      out.push({ path: ['hosts', name, 'workdir'], message: `must be an absolute path, got "${h.workdir}"` });
    }
  }
  // The train stage always produces an EAGLE-3 drafter; serving it with EAGLE starts fine
  // and accepts nothing (incident 3), so the combination is refused before any launch.
  const deploy = doc.stages?.deploy ?? {};
  if (deploy['speculative-algorithm'] === 'EAGLE' && !deploy['draft-model-path']) {
    out.push({
      path: ['stages', 'deploy', 'speculative-algorithm'],
      message:
        'EAGLE cannot serve the EAGLE-3 drafter (LlamaForCausalLMEagle3) that the train stage produces: ' +
        'SGLang would start, bypass the drafter and accept nothing (accept length 1.00). Fix: set speculative-algorithm: EAGLE3',
    });
  }
  return out;
}

export type ConfigInput = z.input<typeof configSchema>;
export type Config = z.output<typeof configSchema>;
export type HostConfig = Config['hosts'][string];
export type ServerConfig = Config['server'];
export type GenerateConfig = Config['stages']['generate'];
export type ExtractConfig = Config['stages']['extract'];
export type TrainConfig = Config['stages']['train'];
export type DeployConfig = Config['stages']['deploy'];
export type BenchmarkConfig = Config['stages']['benchmark'];
export type SpeculativeAlgorithm = (typeof SPECULATIVE_ALGORITHMS)[number];
