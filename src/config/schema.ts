/**
 * The run configuration: one YAML file. Keys are kebab-case, like the SGLang and
 * SpecForge flags they map onto, so a researcher can copy a flag name into the file.
 * Every object is strict: an unknown key is an error, never silently ignored.
 */
import { z } from 'zod';
import { DEFAULT_HEARTBEAT_TIMEOUT_MS, HEARTBEAT_THROTTLE_MS, MIN_HEARTBEAT_TIMEOUT_MS } from './heartbeat.js';

/** "2s", "500ms", "20m", "1h" or a number of seconds → milliseconds. */
export const duration = z
  .union([
    z.number().nonnegative(),
    z.string().regex(/^\d+(\.\d+)?(ms|s|m|h)$/, 'a duration like "2s", "500ms", "20m" or "1h"'),
  ])
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

const workdir = nonEmpty.describe('Absolute directory on the host for run folders, process records and ledgers.');

const gpus = z
  .array(z.number().int().min(0))
  .min(1)
  .refine((a) => new Set(a).size === a.length, 'lists a GPU twice')
  .optional()
  .describe(
    "GPU indices (nvidia-smi's) this run may use on the host; default all. Every launch gets them as CUDA_VISIBLE_DEVICES, and preflight refuses foreign GPU processes only on these GPUs (others are reported and left alone).",
  );

const nvidiaSmi = argv
  .optional()
  .describe(
    "argv of nvidia-smi on the host (for the GPU inventory); default [nvidia-smi]. The demo points it at the simulator's.",
  );

export const localHostSchema = z.strictObject({
  kind: z.literal('local').describe('Where the GPU work runs. "local": this machine; "ssh": a remote host over SSH.'),
  workdir,
  gpus,
  'nvidia-smi': nvidiaSmi,
});

export const sshTargetSchema = z.strictObject({
  host: nonEmpty.describe(
    'An alias from the ssh config file (HostName, User, Port, IdentityFile, ProxyJump apply) or a hostname.',
  ),
  user: nonEmpty.optional().describe('Login name; default: User from the ssh config, else the local user.'),
  port: port.optional().describe('Default: Port from the ssh config, else 22.'),
  'identity-file': nonEmpty
    .optional()
    .describe(
      'Private key file (~ allowed). Default: IdentityFile from the ssh config, else ~/.ssh/id_*; ssh-agent (SSH_AUTH_SOCK) is tried first.',
    ),
  'proxy-jump': nonEmpty
    .optional()
    .describe('Jump hosts, as ssh -J takes them: [user@]host[:port][,...]. Default: ProxyJump from the ssh config.'),
  'config-file': nonEmpty.optional().describe('ssh config file to read aliases from. Default: ~/.ssh/config.'),
  'strict-host-key-checking': z
    .enum(['yes', 'accept-new'])
    .default('yes')
    .describe(
      '"yes": the host key must already be in known_hosts. "accept-new": trust and record a host seen for the first time; a changed key is refused either way.',
    ),
  'known-hosts-file': nonEmpty
    .optional()
    .describe('known_hosts file. Default: UserKnownHostsFile from the ssh config, else ~/.ssh/known_hosts.'),
});

export const sshHostSchema = z.strictObject({
  kind: z.literal('ssh'),
  ssh: sshTargetSchema,
  'exec-prefix': z
    .array(nonEmpty)
    .optional()
    .describe(
      'argv put before every command, for hosts reached through a container runtime, e.g. [pct, exec, "129", "--"] or [docker, exec, -i, NAME]. Files are then read and written through commands too.',
    ),
  'http-address': nonEmpty
    .default('127.0.0.1')
    .describe(
      "Where the SSH host reaches the model server's port: the worker's HTTP is forwarded there through the SSH connection. Default 127.0.0.1. For a container with its own network namespace (behind exec-prefix), the container's address, with server.listen-host set so the server listens on it.",
    ),
  workdir,
  gpus,
  'nvidia-smi': nvidiaSmi,
});

export const hostSchema = z.discriminatedUnion('kind', [localHostSchema, sshHostSchema]);

export const readinessSchema = z.strictObject({
  endpoint: z
    .enum(['/health', '/health_generate'])
    .default('/health')
    .describe(
      'Health endpoint polled for readiness; only exactly HTTP 200 counts. /health generates one token (0.5.4 on), except where server.env sets SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false (0.5.9 on): aerie then polls /health_generate and says so. A release older than those aerie has read (0.5.4 on) may answer /health 200 before it can generate: use /health_generate there.',
    ),
  'require-ready-line': z
    .boolean()
    .default(true)
    .describe(
      'Also wait for the log line "The server is fired up and ready to roll!" (guards against /health 200 during warmup in older SGLang). Turn off only if the server log level hides info lines.',
    ),
  'poll-interval': duration
    .default(2000)
    .describe(
      'How often readiness is polled and a server in use is checked; a dead server is reported within one interval.',
    ),
  budget: duration
    .default(20 * 60_000)
    .describe('How long a model load may take, from the launch, before the launch fails.'),
  'smoke-tokens': z
    .number()
    .int()
    .min(1)
    .max(64)
    .default(8)
    .describe('Tokens of the greedy smoke generation sent once the server is ready.'),
});

export const serverSchema = z.strictObject({
  launcher: argv
    .default(['python3', '-m', 'sglang.launch_server'])
    .describe('argv that starts an SGLang server; aerie appends --model-path, --port and the rest.'),
  port: port.default(30000),
  'listen-host': nonEmpty
    .default('127.0.0.1')
    .describe(
      "SGLang's --host: the address the server listens on. Default 127.0.0.1 (reached through aerie's SSH forward, never exposed); a container's own address (or 0.0.0.0) when the server runs in a separate network namespace.",
    ),
  'tp-size': z.number().int().min(1).default(1),
  'mem-fraction-static': z.number().gt(0).lt(1).optional(),
  'sglang-version': z
    .string()
    .regex(/^(auto|\d+\.\d+\.\d+)$/, 'auto or a release like 0.5.23')
    .default('auto')
    .describe(
      "The host's SGLang release. auto: read through the launcher's interpreter (a launcher of the form [python, -m, sglang.launch_server]); pin it for any other launcher. Every launch is rendered for it, and the ready server must report it. aerie's capture needs 0.5.12 or 0.5.23.",
    ),
  env: envMap
    .default({})
    .describe(
      'Extra environment. ${VAR} is expanded on the worker at launch time, so secrets never enter workflow history.',
    ),
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
    [patchedServerExtractSchema, stockServerExtractSchema, specforgeOfflineExtractSchema],
    {
      error: () =>
        'driver must be "specforge-offline", "patched-server" (the default when dump-dir is set) or "stock-server"',
    },
  ),
);

const trainCommon = {
  'draft-model-config': nonEmpty.describe('EAGLE-3 draft config.json on the host.'),
  env: envMap.default({}),
  'crash-retries': z
    .number()
    .int()
    .min(0)
    .max(20)
    .default(3)
    .describe('Relaunches from the latest checkpoint after a trainer crash.'),
};

const hyper = {
  'chat-template': z.string().default('llama3'),
  'num-epochs': z.number().int().min(1).default(2),
  'batch-size': z.number().int().min(1).default(1),
  'learning-rate': z.number().positive().default(1e-4),
  'max-length': z.number().int().min(16).default(2048),
  'ttt-length': z.number().int().min(1).default(7),
  'save-interval': z.number().int().min(1).default(500),
};

const REVISION_FIELD = 'stages.train.specforge-revision';

/** SpecForge v0.2: torchrun scripts/train_eagle3.py with flags (gone upstream since d5883d5b, 2026-07-13). */
export const specforgeV02TrainSchema = z.strictObject({
  driver: z.literal('specforge-v0.2'),
  'specforge-revision': z
    .enum(['auto', 'v0.2.0', 'v0.2-final-save', 'v0.2-resume'], {
      error: (iss) =>
        iss.input === 'cli'
          ? `"cli" is the current specforge CLI, which driver specforge-v0.2 does not run. Fix: set stages.train.driver: specforge, or ${REVISION_FIELD} to auto, v0.2.0, v0.2-final-save or v0.2-resume`
          : 'must be auto, v0.2.0 (73e6f808), v0.2-final-save (03a3dedb…) or v0.2-resume (961ca7c3…20e2e3f0)',
    })
    .default('auto')
    .describe(
      "Which v0.2 scripts the host has: decides resume (aerie's continuation, or --resume from 961ca7c3) and whether a final checkpoint is saved (03a3dedb). auto: what preflight reads in the launcher's train_eagle3.py.",
    ),
  launcher: argv
    .default(['torchrun', '--standalone', '--nproc_per_node', '8', 'scripts/train_eagle3.py'])
    .describe('argv that starts the trainer; aerie appends the SpecForge flags.'),
  ...trainCommon,
  ...hyper,
  'tp-size': z.number().int().min(1).default(1),
  'extra-args': z.array(z.string()).default([]),
});

const dottedKey = z
  .string()
  .regex(/^[a-z_]+(\.[a-z_0-9]+)+$/, 'a dotted SpecForge config key such as training.warmup_ratio');

/** Current SpecForge: `specforge train -c <config.yaml> key=value ...`, then `specforge export --to sglang`. */
export const specforgeTrainSchema = z.strictObject({
  driver: z.literal('specforge').default('specforge'),
  'specforge-revision': z
    .enum(['auto', 'cli'], {
      error: (iss) =>
        typeof iss.input === 'string' && iss.input.startsWith('v0.2')
          ? `"${iss.input}" names the v0.2 scripts, which driver specforge does not run. Fix: set stages.train.driver: specforge-v0.2, or ${REVISION_FIELD}: auto (or cli)`
          : 'must be auto or cli (a6b6b023 / PyPI specforge 0.2.0)',
    })
    .default('auto')
    .describe(
      "Which SpecForge the host has. auto: what preflight finds through the launcher's interpreter (package version, specforge.cli).",
    ),
  launcher: argv
    .default(['specforge'])
    .describe('argv of the specforge CLI; aerie appends `train -c ...` and `export --to sglang ...`.'),
  ...trainCommon,
  ...hyper,
  'max-steps': z.number().int().min(1).optional(),
  'max-checkpoints': z.number().int().min(0).optional(),
  // SpecForge@a6b6b023:specforge/config/schema.py:54 `target_backend: Literal["sglang"]` (hf/custom were removed with the server-only runtime).
  'target-backend': z
    .literal('sglang', {
      error: (iss) =>
        `SpecForge accepts only "sglang" since the server-only runtime (2026-07): "${String(iss.input)}" fails its config validation. Fix: remove target-backend (the default is sglang)`,
    })
    .default('sglang'),
  'run-id': z
    .string()
    .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/)
    .default('aerie')
    .describe("SpecForge's run_id: checkpoints are <run-id>-step<N>."),
  overrides: z
    .record(dottedKey, z.union([z.string(), z.number(), z.boolean()]))
    .default({})
    .superRefine((o, ctx) => {
      for (const key of Object.keys(o)) {
        const why = refusedOverride(key);
        if (why) ctx.addIssue({ code: 'custom', path: [key], message: why });
      }
    })
    .describe(
      'Extra config fields, written into the generated config.yaml (e.g. deployment.trainer.nproc_per_node: 8).',
    ),
});

/** Config keys aerie writes itself from the run: an override would silently move data, checkpoints or resume. */
export const SPECFORGE_MANAGED_KEYS = [
  'run_id',
  'output_dir',
  'model.target_model_path',
  'model.draft_model_config',
  'model.target_backend',
  'model.vocab_mapping_path',
  'data.train_data_path',
  'data.prompts_path',
  'data.hidden_states_path',
  'training.resume_from',
];

/**
 * Why an override key is refused, or undefined. Besides aerie's own keys, the topology that
 * online training needs: aerie drives the CLI offline only (D1), and a scalar override cannot
 * express SpecForge's disaggregated deployment (list-valued server_urls, Mooncake).
 */
export function refusedOverride(key: string): string | undefined {
  if (SPECFORGE_MANAGED_KEYS.includes(key))
    return `is set by aerie from the run (paths, run id, backend, vocab mapping, resume); remove it from overrides`;
  // SpecForge@a6b6b023:specforge/config/schema.py:489-491,716-725: mode, disaggregated and role go together.
  if (key === 'deployment.mode' || key.startsWith('deployment.disaggregated.') || key === 'training.role') {
    return "selects SpecForge's disaggregated online deployment, which aerie does not drive: aerie trains with the specforge CLI offline (stages.extract.driver: specforge-offline). Remove it from overrides";
  }
  return undefined;
}

/**
 * Any trainer, as an argv template. Placeholders: {target_model}, {draft_model_config},
 * {train_data}, {hidden_states}, {hidden_states_layout}, {output_dir}, {run_dir}; in
 * resume-args also {checkpoint}.
 */
export const commandTrainSchema = z.strictObject({
  driver: z.literal('command'),
  launcher: argv.describe(
    'argv template of the trainer, e.g. [python3, train.py, --data, "{train_data}", --out, "{output_dir}"].',
  ),
  ...trainCommon,
  'drafter-dir': z.string().default('{output_dir}').describe('Where the finished, servable drafter is (template).'),
  'checkpoint-pattern': z
    .string()
    .optional()
    .describe(
      'Regex for checkpoint directory names under {output_dir}, its first group the step (e.g. "^checkpoint-(\\d+)$").',
    ),
  'resume-args': z
    .array(z.string())
    .default([])
    .describe('Appended on a relaunch from a checkpoint, e.g. [--resume-from, "{checkpoint}"].'),
});

export const trainSchema = z.discriminatedUnion(
  'driver',
  [specforgeTrainSchema, specforgeV02TrainSchema, commandTrainSchema],
  {
    error: () =>
      'driver must be "specforge" (the current CLI, the default), "specforge-v0.2" (the retired scripts) or "command"',
  },
);

export type PatchedServerExtract = z.output<typeof patchedServerExtractSchema>;
export type SpecforgeOfflineExtract = z.output<typeof specforgeOfflineExtractSchema>;
export type SpecforgeV02Train = z.output<typeof specforgeV02TrainSchema>;
export type SpecforgeTrain = z.output<typeof specforgeTrainSchema>;
export type CommandTrain = z.output<typeof commandTrainSchema>;

export const deploySchema = z.strictObject({
  'speculative-algorithm': z.enum(SPECULATIVE_ALGORITHMS).default('EAGLE3'),
  'draft-model-path': z.string().optional().describe('Serve this drafter instead of the one the train stage produces.'),
  'num-steps': z.number().int().min(1).optional(),
  'eagle-topk': z.number().int().min(1).optional(),
  'num-draft-tokens': z.number().int().min(1).optional(),
  'max-running-requests': z.number().int().min(1).optional(),
  'spec-v2': z
    .enum(['auto', 'on', 'off'])
    .default('auto')
    .describe(
      "Spec v2 (overlap scheduling of draft and verify), rendered for the host's release: --enable-beta-spec on 0.5.4, SGLANG_ENABLE_SPEC_V2 on 0.5.9-0.5.14, always on from 0.5.15 (off is refused there). auto: the release's default. `aerie plan` says what it does.",
    ),
  'acceptance-threshold': z.number().min(1).default(1.3),
  'acceptance-requests': z.number().int().min(1).default(4),
  'allow-algorithm-mismatch': z
    .boolean()
    .default(false)
    .describe(
      'For experiments only: launch even when the speculative algorithm cannot use the drafter (EAGLE with an EAGLE-3 drafter). The acceptance gate still measures it, and fails it at accept length 1.00.',
    ),
});

export const benchmarkSchema = z
  .strictObject({
    concurrencies: z.array(z.number().int().min(1)).min(1).default([1, 2, 5, 10, 30, 70, 100, 250]),
    'prompts-per-level': z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Requests per level; default max(16, 2 × concurrency).'),
    'output-len': z
      .number()
      .int()
      .min(1)
      .default(256)
      .describe('Tokens per response (EOS ignored), like bench_serving --random-output-len / --sharegpt-output-len.'),
    'input-len': z.number().int().min(1).default(256).describe('Prompt length in words for random prompts.'),
    warmup: z
      .number()
      .int()
      .min(0)
      .default(1)
      .describe('Uncounted requests before each level (output capped at 32 tokens, as bench_serving does).'),
    api: z
      .enum(['generate', 'chat'])
      .default('generate')
      .describe(
        'generate: SGLang native /generate (bench_serving --backend sglang); chat: /v1/chat/completions (--backend sglang-oai-chat).',
      ),
    dataset: z
      .enum(['random', 'held-out', 'file'])
      .default('random')
      .describe(
        'random: prompts of input-len random words; held-out: the first user turns of stages.generate.input rows after the first num-samples (never trained on); file: the first user turns of dataset-path.',
      ),
    'dataset-path': nonEmpty
      .optional()
      .describe(
        'With dataset: file — conversations on the host: SpecForge or ShareGPT jsonl, or a ShareGPT .json array. Prompts are cycled when a level needs more.',
      ),
    baseline: z.boolean().default(true).describe('Also benchmark the target alone, for the speedup column.'),
    'reuse-generate-server': z
      .boolean()
      .default(true)
      .describe(
        "Benchmark the target alone on the generate stage's server right after it regenerated the data (saves a model load); levels still missing later get their own baseline server.",
      ),
    driver: z
      .enum(['aerie', 'bench-serving'])
      .default('aerie')
      .describe(
        "aerie: aerie's own load generator; bench-serving: run `python -m sglang.bench_serving` on the host per level and ingest its JSONL.",
      ),
    'bench-serving': z
      .strictObject({
        launcher: argv
          .optional()
          .describe(
            "argv that runs bench_serving on the host; default: server.launcher's interpreter with -m sglang.bench_serving.",
          ),
        'extra-args': z.array(z.string()).default([]).describe('Appended to every bench_serving command line.'),
        timeout: duration.default(2 * 3_600_000).describe('Longest one level may run.'),
      })
      .prefault({}),
    seed: z.number().int().default(1),
  })
  .superRefine((b, ctx) => {
    if (b.dataset === 'file' && !b['dataset-path']) {
      ctx.addIssue({ code: 'custom', path: ['dataset-path'], message: 'is required when dataset is "file"' });
    }
    if (b.dataset !== 'file' && b['dataset-path']) {
      ctx.addIssue({
        code: 'custom',
        path: ['dataset-path'],
        message: `is only read when dataset is "file" (dataset is "${b.dataset}")`,
      });
    }
  });

export const configSchema = z.strictObject({
  run: z
    .strictObject({
      label: z
        .string()
        .regex(/^[a-z0-9][a-z0-9-]{0,40}$/, 'lowercase letters, digits and dashes')
        .default('run'),
      'on-failure': z
        .enum(['fail', 'wait'])
        .default('fail')
        .describe(
          'After a failure retrying cannot fix: end the run (resume it later with `aerie resume`), or wait for `aerie retry` / `aerie cancel`.',
        ),
      'heartbeat-timeout': duration
        .refine((ms) => ms >= MIN_HEARTBEAT_TIMEOUT_MS, {
          message:
            `must be at least ${MIN_HEARTBEAT_TIMEOUT_MS / 1000}s: workers heartbeat every ${HEARTBEAT_THROTTLE_MS / 1000} s, and a timeout close to that ` +
            `counts a briefly stalled worker as lost and runs its activity twice. Fix: set run.heartbeat-timeout to "${MIN_HEARTBEAT_TIMEOUT_MS / 1000}s" or more (default "${DEFAULT_HEARTBEAT_TIMEOUT_MS / 1000}s")`,
        })
        .default(DEFAULT_HEARTBEAT_TIMEOUT_MS)
        .describe(
          'How long a long-running activity (launch, readiness, generate, extract, train, benchmark, stop) may go without a heartbeat before Temporal counts its worker as lost and retries it on another: the time a killed worker costs. At least 5s.',
        ),
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
      const onHost = h.kind === 'ssh' ? ' on the host (~ and relative paths are not expanded there)' : '';
      out.push({ path: ['hosts', name, 'workdir'], message: `must be an absolute path${onHost}, got "${h.workdir}"` });
    }
    // Each argv word is its own element; "pct exec 129 --" as one string would be one program name.
    const prefix = h?.['exec-prefix'];
    if (Array.isArray(prefix)) {
      prefix.forEach((word: unknown, i: number) => {
        if (typeof word === 'string' && /\s/.test(word.trim())) {
          out.push({
            path: ['hosts', name, 'exec-prefix', String(i)],
            message: `"${word}" holds several words; give each its own element, e.g. [${word
              .trim()
              .split(/\s+/)
              .map((w) => JSON.stringify(w))
              .join(', ')}]`,
          });
        }
      });
    }
  }
  // A forward to a container's address reaches nothing while the server listens on loopback.
  const target = typeof targetHost === 'string' ? hosts[targetHost] : undefined;
  const httpAddress = target?.['http-address'];
  const listenHost = doc.server?.['listen-host'] ?? '127.0.0.1';
  const loopback = (a: unknown) => a === '127.0.0.1' || a === 'localhost' || a === '::1';
  if (typeof httpAddress === 'string' && !loopback(httpAddress) && loopback(listenHost)) {
    out.push({
      path: ['server', 'listen-host'],
      message: `is ${listenHost}, but hosts.${targetHost}.http-address forwards to ${httpAddress}: the server would not listen where aerie connects. Set server.listen-host to ${httpAddress} (or 0.0.0.0)`,
    });
  }
  // One source for the GPU set: a stage env naming other devices would silently win.
  if (Array.isArray(target?.gpus)) {
    const envs: [string[], unknown][] = [
      [['server', 'env'], doc.server?.env],
      [['stages', 'extract', 'env'], doc.stages?.extract?.env],
      [['stages', 'train', 'env'], doc.stages?.train?.env],
    ];
    for (const [path, env] of envs) {
      if (env && typeof env === 'object' && 'CUDA_VISIBLE_DEVICES' in env) {
        out.push({
          path: [...path, 'CUDA_VISIBLE_DEVICES'],
          message: `conflicts with hosts.${targetHost}.gpus, which sets CUDA_VISIBLE_DEVICES for every launch; remove one of them`,
        });
      }
    }
  }
  // D1 (SpecForge@a6b6b023:specforge/config/schema.py:706-710: online CLI training needs the
  // disaggregated deployment) cannot arise: both extract drivers write SpecForge's offline layout.
  // The train stage always produces an EAGLE-3 drafter; serving it with EAGLE starts fine
  // and accepts nothing (incident 3), so the combination is refused before any launch.
  const deploy = doc.stages?.deploy ?? {};
  if (
    deploy['speculative-algorithm'] === 'EAGLE' &&
    !deploy['draft-model-path'] &&
    deploy['allow-algorithm-mismatch'] !== true
  ) {
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
