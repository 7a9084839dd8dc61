/**
 * train_eagle3.py's option table at each v0.2 revision the simulator imitates, in the order the
 * script declares them (argparse prints usage and resolves abbreviations from this set, so a
 * flag one revision lacks is `unrecognized arguments`, exit 2, exactly as there).
 *
 *   v0.2.0           SpecForge@73e6f808:scripts/train_eagle3.py:56-211 + specforge/args.py (tracker, SGLang groups)
 *   v0.2-final-save  SpecForge@03a3dedb:scripts/train_eagle3.py (adds --dataloader-num-workers, --sp-ulysses-size, --sp-ring-size)
 *   v0.2-resume      SpecForge@20e2e3f0:scripts/train_eagle3.py:92-309 + specforge/args.py (the range's last commit)
 */
import type { SimSpecforgeRevision } from '../specforge/revision.js';

export type OptionKind = 'str' | 'int' | 'float' | 'flag' | 'int-list' | 'bool-optional';
export type ArgValue = string | number | boolean | number[] | null;

export interface OptionSpec {
  flag: string;
  kind: OptionKind;
  group: string;
  default?: ArgValue;
  required?: boolean;
  choices?: string[];
}

const opt = (group: string, flag: string, kind: OptionKind, extra: Partial<OptionSpec> = {}): OptionSpec => ({
  flag,
  kind,
  group,
  default: kind === 'flag' ? false : null,
  ...extra,
});

type V02 = Exclude<SimSpecforgeRevision, 'cli'>;
/** Present from this revision on; `until`: gone at this one. */
type Entry = [OptionSpec, { from?: V02; until?: V02 }?];

const ORDER: V02[] = ['v0.2.0', 'v0.2-final-save', 'v0.2-resume'];
const FINAL = { from: 'v0.2-final-save' as const };
const LATE = { from: 'v0.2-resume' as const };

const TABLE: Entry[] = [
  [opt('model', '--target-model-path', 'str', { required: true })],
  [opt('model', '--trust-remote-code', 'flag'), LATE], // SpecForge@20e2e3f0:scripts/train_eagle3.py:99-101
  [opt('model', '--draft-model-config', 'str')],
  [opt('model', '--embedding-key', 'str', { default: 'model.embed_tokens.weight' })],
  [opt('model', '--lm-head-key', 'str', { default: 'lm_head.weight' })],
  [opt('model', '--is-vlm', 'flag')],
  [opt('model', '--shard-target-output', 'bool-optional'), LATE], // BooleanOptionalAction, SpecForge@20e2e3f0:scripts/train_eagle3.py:123-128
  [opt('model', '--target-model-backend', 'str', { default: 'sglang', choices: ['sglang', 'hf', 'custom'] })],
  [opt('dataset', '--train-data-path', 'str', { required: true })],
  [opt('dataset', '--train-hidden-states-path', 'str')],
  [opt('dataset', '--eval-hidden-states-path', 'str')],
  [opt('dataset', '--eval-data-path', 'str')],
  [opt('dataset', '--chat-template', 'str', { default: 'llama3' })],
  [opt('dataset', '--is-preformatted', 'flag')],
  [opt('dataset', '--train-only-last-turn', 'flag'), LATE], // SpecForge@20e2e3f0:scripts/train_eagle3.py:149-154
  [opt('dataset', '--build-dataset-num-proc', 'int', { default: 8 })],
  [opt('dataset', '--dataloader-num-workers', 'int', { default: 4 }), FINAL], // SpecForge@03a3dedb:scripts/train_eagle3.py:109-114
  [opt('training', '--num-epochs', 'int', { default: 10 })],
  [opt('training', '--max-num-steps', 'int')],
  [opt('training', '--batch-size', 'int', { default: 1 })],
  [opt('training', '--learning-rate', 'float', { default: 1e-4 })],
  [opt('training', '--max-length', 'int', { default: 2048 })],
  [opt('training', '--warmup-ratio', 'float', { default: 0.015 })],
  [opt('training', '--total-steps', 'int')],
  [opt('training', '--max-grad-norm', 'float', { default: 0.5 })],
  [opt('training', '--ttt-length', 'int', { default: 7 })],
  [opt('training', '--resume', 'flag')],
  [opt('training', '--ckpt-dir', 'str')],
  [opt('training', '--eval-interval', 'int', { default: 5000 })],
  [opt('training', '--save-interval', 'int', { default: 5000 })],
  [opt('training', '--log-interval', 'int', { default: 50 })],
  [opt('training', '--seed', 'int', { default: 0 })],
  [opt('training', '--draft-accumulation-steps', 'int', { default: 1 })],
  [opt('lk loss', '--lk-loss-type', 'str', { choices: ['lambda', 'alpha'] }), LATE], // SpecForge@20e2e3f0:scripts/train_eagle3.py:207-226
  [opt('lk loss', '--kl-scale', 'float', { default: 1.0 }), LATE],
  [opt('lk loss', '--kl-decay', 'float', { default: 3.0 }), LATE],
  [opt('optimization', '--tp-size', 'int', { default: 1 })],
  [opt('optimization', '--sp-ulysses-size', 'int', { default: 1 }), FINAL], // SpecForge@03a3dedb:scripts/train_eagle3.py:168-169
  [opt('optimization', '--sp-ring-size', 'int', { default: 1 }), FINAL],
  [opt('optimization', '--compact-teacher', 'flag'), LATE], // SpecForge@20e2e3f0:scripts/train_eagle3.py:239-257
  [opt('optimization', '--compact-teacher-chunk-size', 'int'), LATE],
  [opt('optimization', '--attention-backend', 'str', { default: 'flex_attention' })],
  [opt('others', '--cache-key', 'str')],
  [opt('others', '--cache-dir', 'str', { default: './cache' })],
  [opt('others', '--output-dir', 'str', { required: true })],
  [opt('others', '--verbose', 'flag')],
  [opt('others', '--dist-timeout', 'int', { default: 20 })],
  [opt('others', '--model-download-dir', 'str')],
  [opt('vlm', '--min-pixels', 'int', { default: 50176 })],
  [opt('vlm', '--max-pixels', 'int', { default: 802816 })],
  [opt('profiling', '--profile', 'flag')],
  [opt('profiling', '--profile-start-step', 'int', { default: 30 })],
  [opt('profiling', '--profile-num-steps', 'int', { default: 4 })],
  [opt('profiling', '--profile-record-shapes', 'flag')],
  // SGLang's attention-backend list changes with every SGLang release; any name is taken.
  [opt('sglang target model backend', '--sglang-attention-backend', 'str', { default: 'flashinfer' })],
  [opt('sglang target model backend', '--sglang-mem-fraction-static', 'float', { default: 0.4 })],
  [opt('sglang target model backend', '--sglang-context-length', 'int')],
  [opt('sglang target model backend', '--sglang-enable-nccl-nvls', 'flag')],
  [opt('sglang target model backend', '--sglang-enable-symm-mem', 'flag')],
  [opt('sglang target model backend', '--sglang-enable-torch-compile', 'flag')],
  [opt('sglang target model backend', '--sglang-enable-dp-attention', 'flag')],
  [opt('sglang target model backend', '--sglang-enable-dp-lm-head', 'flag')],
  // Gone by 20e2e3f0 (SpecForge@20e2e3f0:specforge/args.py:104-155 declares none of the three; :189 says they are not forwarded).
  [opt('sglang target model backend', '--sglang-enable-piecewise-cuda-graph', 'flag'), { until: 'v0.2-resume' }],
  [
    opt('sglang target model backend', '--sglang-piecewise-cuda-graph-max-tokens', 'int', { default: 4096 }),
    { until: 'v0.2-resume' },
  ],
  [opt('sglang target model backend', '--sglang-piecewise-cuda-graph-tokens', 'int-list'), { until: 'v0.2-resume' }],
  [opt('sglang target model backend', '--sglang-ep-size', 'int', { default: 1 })],
  [
    opt('tracker', '--report-to', 'str', {
      default: 'none',
      choices: ['wandb', 'tensorboard', 'swanlab', 'mlflow', 'none'],
    }),
  ],
  [opt('tracker', '--wandb-project', 'str')],
  [opt('tracker', '--wandb-name', 'str')],
  [opt('tracker', '--wandb-key', 'str')],
  [opt('tracker', '--wandb-offline', 'flag'), LATE], // SpecForge@20e2e3f0:specforge/args.py:38-48
  [opt('tracker', '--wandb-dir', 'str'), LATE],
  [opt('tracker', '--swanlab-project', 'str')],
  [opt('tracker', '--swanlab-name', 'str')],
  [opt('tracker', '--swanlab-key', 'str')],
  [opt('tracker', '--mlflow-tracking-uri', 'str')],
  [opt('tracker', '--mlflow-experiment-name', 'str')],
  [opt('tracker', '--mlflow-run-name', 'str')],
];

export type V02Revision = V02;

export function trainOptions(rev: V02 = 'v0.2.0'): OptionSpec[] {
  const at = ORDER.indexOf(rev);
  return TABLE.filter(([, when]) => {
    if (when?.from && ORDER.indexOf(when.from) > at) return false;
    if (when?.until && ORDER.indexOf(when.until) <= at) return false;
    return true;
  }).map(([o]) => o);
}

/** Every option string argparse registers for a spec (BooleanOptionalAction adds `--no-…`). */
export const optionStrings = (o: OptionSpec): string[] =>
  o.kind === 'bool-optional' ? [o.flag, o.flag.replace(/^--/, '--no-')] : [o.flag];
