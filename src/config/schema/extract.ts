/** stages.extract: the target's hidden states, in SpecForge's offline layout, by one of four drivers. */
import { z } from 'zod';
import { poolServerSchema } from './pool-server.js';
import { argv, envMap, nonEmpty } from './fields.js';

/**
 * The target launched with aerie's own capture (py/aerie_hs, an SGLang plugin put on the
 * launch's PYTHONPATH): aerie tokenizes every sample as SpecForge would, prefills it by ids,
 * and converts each dump into SpecForge's offline layout on the host.
 */
const hostSideFields = {
  python: nonEmpty
    .default('python3')
    .describe(
      "Interpreter on the host with transformers and numpy (the target's environment): it tokenizes, converts and self-checks. SGLang's own python works.",
    ),
  'draft-model-config': nonEmpty
    .optional()
    .describe(
      "Draft config.json on the host: its eagle_aux_hidden_state_layer_ids pick the captured layers; stages.train's when absent.",
    ),
  'chat-template': z
    .string()
    .default('llama3')
    .describe("SpecForge's chat template name for the tokens (py/aerie_hs/tokens.py)."),
  'max-length': z
    .number()
    .int()
    .min(16)
    .default(2048)
    .describe("Tokens per sample after truncation, as SpecForge's --max-length."),
  'file-group-size': z
    .number()
    .int()
    .min(1)
    .default(2000)
    .describe("Feature files per rows_<g>-<g+G> folder (SpecForge's --file-group-size)."),
  'hidden-size': z
    .number()
    .int()
    .min(1)
    .optional()
    .describe("Target hidden size; read from the model's config.json when absent."),
  concurrency: z.number().int().min(1).default(8),
  'cross-check': z
    .enum(['auto', 'require', 'off'])
    .default('auto')
    .describe(
      "Also run SpecForge's own preprocess_conversations on the host and refuse ids that differ: when SpecForge is importable (auto), always (require), or never.",
    ),
  'self-check': z
    .strictObject({
      samples: z.number().int().min(1).default(8).describe('Samples checked before extraction commits to all of them.'),
      'final-samples': z
        .number()
        .int()
        .min(1)
        .default(32)
        .describe('Samples (spread over the run) checked again before the stage counts as good.'),
      'min-agreement': z
        .number()
        .gt(0)
        .max(1)
        .default(0.5)
        .describe('Pooled rate at which the final states through lm_head predict the next assistant token.'),
    })
    .prefault({}),
};

export const patchedServerExtractSchema = z.strictObject({
  driver: z.literal('patched-server'),
  'dump-dir': nonEmpty
    .default('/dev/shm/aerie-hs')
    .describe(
      "RAM-backed directory on the host the capture writes each request's dump into (the run's own subfolder); dumps leave it as SpecForge files.",
    ),
  ...hostSideFields,
  servers: z
    .array(poolServerSchema)
    .min(1)
    .max(64)
    .optional()
    .describe(
      'A pool of extraction servers (GPU subsets of the target host, or hosts that share its filesystem: hosts.<name>.shares-files-with): each takes the next batch of samples and writes its SpecForge files under hidden_states/pool/ on the shared filesystem, never through the worker. concurrency is per server. Default: one server on the target host.',
    ),
  'batch-size': z
    .number()
    .int()
    .min(1)
    .max(1_000_000)
    .optional()
    .describe('Samples a pool server takes at a time (with servers only). Default as for stages.generate.batch-size.'),
});

/**
 * Stock SGLang 0.5.23, no plugin: the states come back over HTTP to aerie's client on the host
 * (py/aerie_hs/stock_client.py), in two server launches (aux states, then the final state).
 * JSON floats are ~10× the states' bf16 size: for small targets and tests.
 */
export const stockServerExtractSchema = z.strictObject({
  driver: z.literal('stock-server'),
  'dump-dir': nonEmpty
    .optional()
    .describe(
      "Where each sample's states wait between the two passes (aux 6·H bytes a token until the final pass); default: the run's hidden_states/.stock on the output disk.",
    ),
  ...hostSideFields,
});

/**
 * aerie's capture on a transformers forward pass on the host (py/aerie_hs/hf_extract.py), run as
 * a detached job: no extraction server. For targets whose serving engine cannot hand over the
 * states (vLLM 0.32's extraction is GPU-only) and small enough to load with transformers there.
 */
const { concurrency: _serverConcurrency, python: _serverPython, ...hfHostFields } = hostSideFields;
export const transformersExtractSchema = z.strictObject({
  driver: z.literal('transformers'),
  python: nonEmpty
    .default('python3')
    .describe(
      'Interpreter on the host with torch, transformers and numpy: it tokenizes, runs the forward pass, writes the files and self-checks.',
    ),
  ...hfHostFields,
  dtype: z
    .enum(['auto', 'bfloat16', 'float16', 'float32'])
    .default('auto')
    .describe(
      "The forward pass's dtype: auto takes the checkpoint's own (config.json torch_dtype). Files are bf16 either way.",
    ),
  device: z
    .enum(['auto', 'cpu', 'cuda'])
    .default('auto')
    .describe('Where the forward runs: auto is cuda when torch sees a GPU there, else cpu.'),
  'batch-size': z
    .number()
    .int()
    .min(1)
    .max(4096)
    .default(16)
    .describe('Samples whose states are gathered, written and released at a time (one unpadded forward per sample).'),
  env: envMap.default({}),
  'crash-retries': z.number().int().min(0).max(20).default(3),
});

/** SGLANG_HS_DUMP_DIR is in no SGLang release (conformance.md S1): say so instead of "unrecognized key". */
function withoutDumpEnv(v: object, addIssue: (message: string) => void): object {
  if (!('dump-env' in v)) return v;
  addIssue(
    'dump-env is gone: SGLANG_HS_DUMP_DIR exists in no SGLang release (conformance.md S1). aerie now ships its own capture ' +
      '(py/aerie_hs, loaded as an SGLang plugin per launch) and sets AERIE_HS_DUMP_DIR itself. Fix: delete stages.extract.dump-env',
  );
  const { 'dump-env': _gone, ...rest } = v as Record<string, unknown>;
  return rest;
}

/** SpecForge's scripts/prepare_hidden_states.py, launched detached; writes rows_<k>/data_{i}.ckpt for offline training. */
export const specforgeOfflineExtractSchema = z.strictObject({
  driver: z.literal('specforge-offline'),
  launcher: argv
    .default(['torchrun', '--standalone', '--nproc_per_node', '8', 'scripts/prepare_hidden_states.py'])
    .describe('argv that starts prepare_hidden_states.py; aerie appends its flags.'),
  'draft-model-config': nonEmpty.optional().describe("Draft config.json on the host; stages.train's when absent."),
  'chat-template': z.string().default('llama3'),
  'max-length': z.number().int().min(16).default(2048),
  'tp-size': z.number().int().min(1).default(1),
  'batch-size': z.number().int().min(1).default(32),
  'file-group-size': z.number().int().min(1).default(2000),
  compress: z.boolean().default(false).describe('--compress: data_{i}.ckpt.gz instead of .ckpt.'),
  'is-preformatted': z.boolean().default(false),
  'sglang-mem-fraction-static': z.number().gt(0).lt(1).optional(),
  'dist-timeout': z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('--dist-timeout; raise it on large datasets (NCCL barrier timeouts).'),
  'hidden-size': z
    .number()
    .int()
    .min(1)
    .optional()
    .describe("Target hidden size for the disk estimate; read from the model's config.json when absent."),
  python: nonEmpty
    .default('python3')
    .describe('Interpreter on the host that checks the written files (reads their zip directories).'),
  env: envMap.default({}),
  'extra-args': z.array(z.string()).default([]),
  'crash-retries': z.number().int().min(0).max(20).default(3),
});

/**
 * The extract driver when the config names none: patched-server for a section that sets its
 * dump-dir (configs written before the CLI became the default), else specforge-offline, the
 * one the default trainer (the specforge CLI, offline only) can read.
 */
export function defaultExtractDriver(extract: unknown): 'patched-server' | 'specforge-offline' {
  return typeof extract === 'object' && extract !== null && 'dump-dir' in extract
    ? 'patched-server'
    : 'specforge-offline';
}

export const extractSchema = z.preprocess(
  (v, ctx) => {
    if (typeof v !== 'object' || v === null) return v;
    const rest = withoutDumpEnv(v, (message) =>
      ctx.addIssue({ code: 'custom', path: ['dump-env'], message, input: v }),
    );
    return 'driver' in rest ? rest : { ...rest, driver: defaultExtractDriver(rest) };
  },
  z.discriminatedUnion(
    'driver',
    [patchedServerExtractSchema, stockServerExtractSchema, specforgeOfflineExtractSchema, transformersExtractSchema],
    {
      error: () =>
        'driver must be "specforge-offline", "patched-server" (the default when dump-dir is set), "stock-server" or "transformers"',
    },
  ),
);

export type PatchedServerExtract = z.output<typeof patchedServerExtractSchema>;
export type SpecforgeOfflineExtract = z.output<typeof specforgeOfflineExtractSchema>;
export type TransformersExtract = z.output<typeof transformersExtractSchema>;
