/**
 * Reads a SpecForge v0.2 training log as it grows. The progress is tqdm's meter on stderr,
 *   `\rTraining Epoch 1:  42%|████▏     | 40/96 [00:20<00:28,  1.99it/s, loss=4.31, acc=0.37, time=0.50s]`
 * many per physical line (carriage returns, a newline only when an epoch's bar closes),
 * interleaved with print/logging lines on stdout:
 *   `rank 0: Auto-calculated total_steps: 192 (num_epochs=2 * steps_per_epoch=96)`
 *   `Saved model configuration to <output-dir>/epoch_0_step_40`
 *   `Finetuning from base model: <dir>`  (a --ckpt-dir launch)
 * Chunks may start or end anywhere; an unfinished tail is carried in `partial` to the next call.
 */

export interface TrainProgress {
  /** SpecForge's epoch index as printed (0-based). */
  epoch?: number;
  totalEpochs?: number;
  /** Steps done in this launch: epoch × stepsPerEpoch + epochStep (a --ckpt-dir launch counts from 0). */
  step?: number;
  /** Steps this launch will run: num_epochs × steps_per_epoch, capped by --max-num-steps. */
  totalSteps?: number;
  loss?: number;
  acc?: number;
  /** Newline-terminated lines read so far. */
  lines: number;
  epochStep?: number;
  stepsPerEpoch?: number;
  maxNumSteps?: number;
  /** The last checkpoint the trainer reported saving. */
  lastCheckpoint?: string;
  /** Weights the launch started from (--ckpt-dir, or what a working --resume found). */
  startedFrom?: string;
  /** Unfinished tail of the last chunk (kept short). */
  partial?: string;
}

const METER = /Training Epoch (\d+):\s*\d+%\|[^|\r\n]*\|\s*(\d+)\/(\d+)\s*\[([^\]\r\n]*)\]/g;
const NUM = '([-+]?(?:\\d+\\.?\\d*(?:[eE][-+]?\\d+)?|nan|inf))';
const LOSS = new RegExp(`(?:^|[ ,])loss=${NUM}`);
const ACC = new RegExp(`(?:^|[ ,])acc=${NUM}`);
const AUTO_TOTAL = /Auto-calculated total_steps: (\d+) \(num_epochs=(\d+) \* steps_per_epoch=(\d+)\)/g;
const ARG_EPOCHS = /(?:^|\n)num_epochs +·* *(\d+)\s*$/gm;
const ARG_MAX_STEPS = /(?:^|\n)max_num_steps +·* *(\d+)\s*$/gm;
const SAVED = /Saved model configuration to ([^\r\n]+)\n/g;
const STARTED = /(?:Finetuning from base model|Last checkpoint detected): ([^\r\n]+)\n/g;
const MAX_PARTIAL = 4096;

const num = (s: string): number => (s === 'nan' ? NaN : s === 'inf' ? Infinity : Number(s));

function last(re: RegExp, text: string): RegExpExecArray | null {
  let m: RegExpExecArray | null;
  let found: RegExpExecArray | null = null;
  re.lastIndex = 0;
  while ((m = re.exec(text)) !== null) found = m;
  return found;
}

export function parseTrainProgress(text: string, prev?: TrainProgress): TrainProgress {
  const p: TrainProgress = { ...(prev ?? { lines: 0 }) };
  const all = (prev?.partial ?? '') + text;
  const cut = all.lastIndexOf('\n') + 1;
  const complete = all.slice(0, cut);
  p.lines = (prev?.lines ?? 0) + (complete.match(/\n/g)?.length ?? 0);

  const auto = last(AUTO_TOTAL, complete);
  if (auto) {
    p.totalEpochs = Number(auto[2]);
    p.stepsPerEpoch = Number(auto[3]);
  }
  const epochsArg = last(ARG_EPOCHS, complete);
  if (epochsArg) p.totalEpochs = Number(epochsArg[1]);
  const maxArg = last(ARG_MAX_STEPS, complete);
  if (maxArg) p.maxNumSteps = Number(maxArg[1]);
  const saved = last(SAVED, complete);
  if (saved) p.lastCheckpoint = saved[1].trim();
  const started = last(STARTED, complete);
  if (started && started[1].trim() !== 'None') p.startedFrom = started[1].trim();

  // Meters end with ']', so one cut short at the end of the chunk does not match yet.
  const meter = last(METER, all);
  if (meter) {
    p.epoch = Number(meter[1]);
    p.epochStep = Number(meter[2]);
    p.stepsPerEpoch = Number(meter[3]);
    const loss = LOSS.exec(meter[4]);
    const acc = ACC.exec(meter[4]);
    if (loss) p.loss = num(loss[1]);
    if (acc) p.acc = num(acc[1]);
  }
  if (p.epoch !== undefined && p.epochStep !== undefined && p.stepsPerEpoch !== undefined) {
    p.step = p.epoch * p.stepsPerEpoch + p.epochStep;
  }
  if (p.totalEpochs !== undefined && p.stepsPerEpoch !== undefined) {
    p.totalSteps = Math.min(p.totalEpochs * p.stepsPerEpoch, p.maxNumSteps ?? Infinity);
  }

  // Keep the unfinished line, from its last meter boundary, and never more than a few KiB.
  let tail = all.slice(cut);
  const cr = tail.lastIndexOf('\r');
  if (cr >= 0) tail = tail.slice(cr + 1);
  p.partial = tail.length > MAX_PARTIAL ? tail.slice(-MAX_PARTIAL) : tail;
  if (!p.partial) delete p.partial;
  return p;
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
  const p: TrainProgress = { ...(prev ?? { lines: 0 }) };
  const all = (prev?.partial ?? '') + text;
  const cut = all.lastIndexOf('\n') + 1;
  const complete = all.slice(0, cut);
  p.lines = (prev?.lines ?? 0) + (complete.match(/\n/g)?.length ?? 0);
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
  let tail = all.slice(cut);
  const cr = tail.lastIndexOf('\r');
  if (cr >= 0) tail = tail.slice(cr + 1);
  p.partial = tail.length > MAX_PARTIAL ? tail.slice(-MAX_PARTIAL) : tail;
  if (!p.partial) delete p.partial;
  return p;
}
