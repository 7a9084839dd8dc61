/** stages.train: the drafter's trainer, SpecForge's current CLI, its retired v0.2 scripts, or any command. */
import { z } from 'zod';
import { argv, envMap, nonEmpty } from './fields.js';

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

export type SpecforgeV02Train = z.output<typeof specforgeV02TrainSchema>;
export type SpecforgeTrain = z.output<typeof specforgeTrainSchema>;
export type CommandTrain = z.output<typeof commandTrainSchema>;
