/**
 * Why a training launch died, from the tail of its log, and whether relaunching can help.
 * Only a plain crash is worth a relaunch from the newest checkpoint; an OOM comes back at
 * the same step, and a missing module, a rejected flag, a missing file or a full disk come
 * back at once. torchrun's ChildFailedError summary is the wrapper, never the cause.
 */

export type TrainFailureKind =
  'oom' | 'crash' | 'missing-module' | 'usage' | 'missing-file' | 'disk-full' | 'setup' | 'teardown';

export interface TrainFailure {
  kind: TrainFailureKind;
  retryable: boolean;
  advice: string;
  /** The log line the verdict rests on. */
  evidence?: string;
}

const lines = (text: string): string[] =>
  text
    .split(/[\r\n]+/)
    .map((l) => l.replace(/^\[rank\d+\]:\s?/, '').trim())
    .filter(Boolean);

function lastMatch(ls: string[], re: RegExp): string | undefined {
  for (let i = ls.length - 1; i >= 0; i--) if (re.test(ls[i])) return ls[i];
  return undefined;
}

const cap = (s: string, n = 300): string => (s.length > n ? `${s.slice(0, n)}…` : s);

const OOM = /torch\.(cuda\.)?OutOfMemoryError|CUDA out of memory|HIP out of memory/;
const MISSING_MODULE =
  /ModuleNotFoundError: No module named|(^|\s)No module named \S+|can't open file '|: command not found|torchrun: not found|exec: .*: not found|spawn \S+ ENOENT/;
const USAGE = /: error: (unrecognized arguments|the following arguments are required|argument --|ambiguous option)/;
const DISK = /No space left on device|Disk quota exceeded|ENOSPC/;
const MISSING_FILE =
  /FileNotFoundError|Unable to find '|is not a valid directory|Incorrect path_or_model_id|Error no file named/;
const EXCEPTION = /^([\w.]+(Error|Exception|Interrupt)|torch\.\S+Error)\b(:|$)/;
// train_eagle3.py building the drafter from its config: the same config fails the same way on every launch
// (SpecForge@73e6f808:scripts/train_eagle3.py:322-367; the real 73e6f808 run on transformers 5 died there).
const DRAFT_SETUP = /train_eagle3\.py", line \d+, in build_draft_model\b/;
const NCCL_TIMEOUT = /Watchdog caught collective operation timeout|NCCL.*[Tt]imeout|DistBackendError|Timed out waiting/;

/**
 * The script's last frame is main() calling destroy_distributed(), after the training loop and
 * its saves: before 7a81ce53 that tears down a size-1 mesh group torch no longer registers and
 * raises `ValueError: Invalid process group specified` (SpecForge@73e6f808:specforge/distributed.py:72-76,
 * scripts/train_eagle3.py:832; seen in test/fixtures/real/specforge-73e6f808/clean.log on torch 2.11).
 * The training is done: the caller judges it by its checkpoints, as after a clean exit.
 */
function teardownOnly(ls: string[]): string | undefined {
  // The worker's traceback, not torchrun's own report after it (which ends `in main` too).
  const end = ls.findIndex((l) => /ChildFailedError|failed \(exitcode/.test(l));
  const worker = end < 0 ? ls : ls.slice(0, end);
  let main = -1;
  for (let i = 0; i < worker.length; i++) if (/^File ".*\.py", line \d+, in main$/.test(worker[i]!)) main = i;
  if (main < 0 || worker[main + 1] !== 'destroy_distributed()') return undefined;
  return worker.slice(main + 2).find((l) => EXCEPTION.test(l));
}

export function classifyTrainFailure(logTail: string): TrainFailure {
  const ls = lines(logTail);
  const teardown = teardownOnly(ls);
  if (teardown) {
    return {
      kind: 'teardown',
      retryable: true,
      evidence: cap(teardown),
      advice: `The trainer finished and then failed tearing down torch.distributed (${cap(teardown, 120)}), a SpecForge bug fixed in 7a81ce53; its checkpoints count as a clean exit's.`,
    };
  }

  const oom = lastMatch(ls, OOM);
  if (oom) {
    return {
      kind: 'oom',
      retryable: false,
      evidence: cap(oom),
      advice:
        'The trainer ran out of GPU memory; relaunching unchanged fails again at the same point. Set ' +
        'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True in stages.train.env (fragmentation is the usual cause of a late OOM), ' +
        'and if it persists lower batch-size or max-length, or raise tp-size; then resume the run.',
    };
  }
  const missing = lastMatch(ls, MISSING_MODULE);
  if (missing) {
    return {
      kind: 'missing-module',
      retryable: false,
      evidence: cap(missing),
      advice:
        'The launcher could not start SpecForge (' +
        cap(missing, 120) +
        '). Point stages.train.launcher at the torchrun/python ' +
        'of the environment where SpecForge and its dependencies are installed, and at the right scripts/train_eagle3.py path.',
    };
  }
  const usage = lastMatch(ls, USAGE);
  if (usage) {
    return {
      kind: 'usage',
      retryable: false,
      evidence: cap(usage),
      advice: `train_eagle3.py rejected its arguments (${cap(usage.replace(/^.*?: error: /, ''), 160)}). Fix stages.train.extra-args, or check which SpecForge version the host has.`,
    };
  }
  const disk = lastMatch(ls, DISK);
  if (disk) {
    return {
      kind: 'disk-full',
      retryable: false,
      evidence: cap(disk),
      advice:
        'The disk filled up (each checkpoint is a full copy of the drafter). Free space under the output directory or raise save-interval, then resume.',
    };
  }
  const file = lastMatch(ls, MISSING_FILE);
  if (file) {
    return {
      kind: 'missing-file',
      retryable: false,
      evidence: cap(file),
      advice: `A path the trainer needs does not exist on the host (${cap(file, 200)}). Check the train stage's paths and that the earlier stages produced their outputs.`,
    };
  }
  const cause =
    lastMatch(
      ls.filter((l) => !/ChildFailedError/.test(l)),
      EXCEPTION,
    ) ?? lastMatch(ls, /Segmentation fault|core dumped|Killed|exitcode\s*:\s*-?\d+/);
  if (cause && DRAFT_SETUP.test(logTail)) {
    return {
      kind: 'setup',
      retryable: false,
      evidence: cap(cause),
      advice:
        `train_eagle3.py could not build the draft model (${cap(cause, 160)}) before training started; a relaunch fails the same way. ` +
        "Check stages.train.draft-model-config, and that the host's transformers is one this SpecForge revision supports.",
    };
  }
  const nccl = NCCL_TIMEOUT.test(logTail);
  return {
    kind: 'crash',
    retryable: true,
    evidence: cause ? cap(cause) : undefined,
    advice:
      `The trainer crashed${cause ? ` (${cap(cause, 160)})` : ''}; aerie relaunches it from the newest complete checkpoint.` +
      (nccl
        ? ' A collective timed out: on large datasets raise --dist-timeout (minutes) in stages.train.extra-args.'
        : ''),
  };
}
