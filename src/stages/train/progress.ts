/**
 * Reads a SpecForge v0.2 training log as it grows, from what really reaches the log. Every
 * `print_on_rank0` / `print_with_rank` message (Auto-calculated total_steps, Saved model
 * configuration, Finetuning from base model, Restored optimizer…) goes to `logger.info` of a
 * logger no one configures (SpecForge@73e6f808:specforge/utils.py:12,52-61;
 * SpecForge@20e2e3f0:specforge/utils.py:18,190-214; no basicConfig/addHandler anywhere in
 * specforge/ or the script at 73e6f808, 03a3dedb, 961ca7c3 or 20e2e3f0), so Python drops it.
 * What remains:
 * - tqdm's meter on stderr, `tqdm(train_dataloader, desc=f"Training Epoch {epoch}")` with
 *   postfix loss/acc/time (SpecForge@73e6f808:scripts/train_eagle3.py:719-721,772-778), plus
 *   acceptance_rate and grad_norm at the end (SpecForge@20e2e3f0:scripts/train_eagle3.py:1280-1288):
 *   `\rTraining Epoch 1:  42%|████▏     | 40/96 [00:20<00:28,  1.99it/s, loss=4.31, acc=0.37, time=0.50s]`
 *   many per physical line (carriage returns, a newline when an epoch's bar closes). n/N is
 *   the batch within the epoch and N = len(train_dataloader), the steps per epoch; after a
 *   working --resume the skipped batches still advance n (SpecForge@20e2e3f0:scripts/train_eagle3.py:1168-1171).
 * - From ee22b877 (2025-12-25) a real `print` of the parsed args, `num_epochs ···· 2`
 *   (SpecForge@03a3dedb:specforge/utils.py:59-71); the v0.2.0 release itself prints none.
 * - From 961ca7c3, `print(f"Last checkpoint detected: {path}")` on every rank after --resume
 *   (SpecForge@20e2e3f0:scripts/train_eagle3.py:522).
 * So totals come from the launch's own config (`seedProgress`), checkpoints from the
 * directory listing (run.ts), never from a log line. Chunks may start or end anywhere;
 * an unfinished tail is carried in `partial` to the next call.
 */
import type { TrainLaunch } from './launch.js';
import { keepPartial, readChunk } from './log-chunk.js';

export interface TrainProgress {
  /** SpecForge's epoch index as printed (0-based). */
  epoch?: number;
  totalEpochs?: number;
  /** Steps of the whole run: baseStep + epoch × stepsPerEpoch + epochStep. */
  step?: number;
  /** Steps the whole run is planned for: baseStep + num_epochs × steps_per_epoch, capped by --max-num-steps. */
  totalSteps?: number;
  loss?: number;
  acc?: number;
  acceptanceRate?: number;
  gradNorm?: number;
  /** Newline-terminated lines read so far. */
  lines: number;
  epochStep?: number;
  stepsPerEpoch?: number;
  maxNumSteps?: number;
  /** Steps done before this launch by the runs it continues (a --ckpt-dir launch counts from 0). */
  baseStep?: number;
  /** The last checkpoint the trainer reported saving (trainers that print one; v0.2 does not). */
  lastCheckpoint?: string;
  /** What a working --resume loaded. */
  startedFrom?: string;
  /** Unfinished tail of the last chunk (kept short). */
  partial?: string;
}

/** What a launch's own argv says before its log says anything. */
export function seedProgress(l: Pick<TrainLaunch, 'numEpochs' | 'maxNumSteps'>, baseStep = 0): TrainProgress {
  const p: TrainProgress = { lines: 0, totalEpochs: l.numEpochs };
  if (l.maxNumSteps !== undefined) p.maxNumSteps = l.maxNumSteps;
  if (baseStep > 0) p.baseStep = baseStep;
  return p;
}

const METER = /Training Epoch (\d+):\s*\d+%\|[^|\r\n]*\|\s*(\d+)\/(\d+)\s*\[([^\]\r\n]*)\]/g;
const NUM = '([-+]?(?:\\d+\\.?\\d*(?:[eE][-+]?\\d+)?|nan|inf))';
const postfix = (key: string): RegExp => new RegExp(`(?:^|[ ,])${key}=${NUM}`);
const LOSS = postfix('loss');
const ACC = postfix('acc');
const ACCEPT = postfix('acceptance_rate');
const GRAD = postfix('grad_norm');
// print_args_with_dots: the key padded, a run of middle dots (none when the value is long), the value.
const ARG_EPOCHS = /(?:^|\n)num_epochs +·* *(\d+)\s*$/gm;
const ARG_MAX_STEPS = /(?:^|\n)max_num_steps +·* *(\d+)\s*$/gm;
const DETECTED = /Last checkpoint detected: ([^\r\n]+)\n/g;

const num = (s: string): number => (s === 'nan' ? NaN : s === 'inf' ? Infinity : Number(s));

function last(re: RegExp, text: string): RegExpExecArray | null {
  let m: RegExpExecArray | null;
  let found: RegExpExecArray | null = null;
  re.lastIndex = 0;
  while ((m = re.exec(text)) !== null) found = m;
  return found;
}

export function parseTrainProgress(text: string, prev?: TrainProgress): TrainProgress {
  const { p, all, complete, tail } = readChunk(text, prev);

  const epochsArg = last(ARG_EPOCHS, complete);
  if (epochsArg) p.totalEpochs = Number(epochsArg[1]);
  const maxArg = last(ARG_MAX_STEPS, complete);
  if (maxArg) p.maxNumSteps = Number(maxArg[1]);
  const detected = last(DETECTED, complete);
  if (detected && detected[1].trim() !== 'None') p.startedFrom = detected[1].trim();

  // Meters end with ']', so one cut short at the end of the chunk does not match yet.
  const meter = last(METER, all);
  if (meter) {
    p.epoch = Number(meter[1]);
    p.epochStep = Number(meter[2]);
    p.stepsPerEpoch = Number(meter[3]);
    for (const [re, key] of [
      [LOSS, 'loss'],
      [ACC, 'acc'],
      [ACCEPT, 'acceptanceRate'],
      [GRAD, 'gradNorm'],
    ] as const) {
      const m = re.exec(meter[4]);
      if (m) p[key] = num(m[1]);
    }
  }
  const base = p.baseStep ?? 0;
  if (p.epoch !== undefined && p.epochStep !== undefined && p.stepsPerEpoch !== undefined) {
    p.step = base + p.epoch * p.stepsPerEpoch + p.epochStep;
  }
  if (p.totalEpochs !== undefined && p.stepsPerEpoch !== undefined) {
    p.totalSteps = base + Math.min(p.totalEpochs * p.stepsPerEpoch, p.maxNumSteps ?? Infinity);
  }

  return keepPartial(p, tail);
}

/**
 * Progress from trainers other than v0.2's script (the current specforge CLI, a command
 * template): the last tqdm-style meter `n/total [...]` with key=value postfixes, or logging
 * lines such as `step 50/192 epoch 0 | train/loss=4.31 train/acc=0.37`; checkpoints from
 * `Saved checkpoint <dir>`. Every field is optional: a trainer that prints none of this still
 * gets heartbeats (with the log's line count).
 */
const ANY_METER = /(\d+)\/(\d+)\s*\[([^\]\r\n]*)\]/g;
const STEP_LINE = /\bstep[ =:]+(\d+)(?:\s*\/\s*(\d+))?/gi;
const EPOCH = /\bepoch[ =:]+(\d+)/i;
const KV_LOSS = new RegExp(`(?:^|[ ,|])(?:train/)?loss[=:] ?${NUM}`);
const KV_ACC = new RegExp(`(?:^|[ ,|])(?:train/)?acc(?:uracy)?[=:] ?${NUM}`);
const SAVED_CKPT = /Saved checkpoint (?:to )?([^\r\n]+)\n/g;

export function parseGenericProgress(text: string, prev?: TrainProgress): TrainProgress {
  const { p, all, complete, tail } = readChunk(text, prev);
  const saved = last(SAVED_CKPT, complete);
  if (saved) p.lastCheckpoint = saved[1]!.trim();

  // The newest report wins, whether a meter or a logging line: compare where each was found.
  const meter = last(ANY_METER, all);
  const stepLine = last(STEP_LINE, complete);
  const meterAt = meter ? all.lastIndexOf(meter[0]) : -1;
  const stepAt = stepLine ? complete.lastIndexOf(stepLine[0]) : -1;
  if (meter && meterAt >= stepAt) {
    p.step = Number(meter[1]);
    p.totalSteps = Number(meter[2]);
    const inside = meter[3]!;
    const e = EPOCH.exec(inside);
    if (e) p.epoch = Number(e[1]);
    const loss = KV_LOSS.exec(inside);
    const acc = KV_ACC.exec(inside);
    if (loss) p.loss = num(loss[1]!);
    if (acc) p.acc = num(acc[1]!);
  } else if (stepLine) {
    const lineStart = complete.lastIndexOf('\n', stepAt) + 1;
    const lineEnd = complete.indexOf('\n', stepAt);
    const line = complete.slice(lineStart, lineEnd === -1 ? undefined : lineEnd);
    p.step = Number(stepLine[1]);
    if (stepLine[2]) p.totalSteps = Number(stepLine[2]);
    const e = EPOCH.exec(line);
    if (e) p.epoch = Number(e[1]);
    const loss = KV_LOSS.exec(line);
    const acc = KV_ACC.exec(line);
    if (loss) p.loss = num(loss[1]!);
    if (acc) p.acc = num(acc[1]!);
  }
  return keepPartial(p, tail);
}
