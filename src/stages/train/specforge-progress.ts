/**
 * Reads the current SpecForge CLI's training log (`specforge train -c cfg.yaml`, HEAD
 * a6b6b023 = PyPI specforge 0.2.0) as it grows. What HEAD really prints, from its source:
 *
 * - One line per `training.log_interval` optimizer steps, a Python dict repr printed on every
 *   rank (the logger is not rank-gated; the values are DP-reduced, so ranks agree, all but the
 *   perf/ timings, SpecForge@a6b6b023:specforge/training/controller.py:276-297): with N ranks
 *   N lines per step, in any order, possibly run together on one line:
 *     `step 8: {'acc_0': 0.41, …, 'ploss_0': 5.2, …, 'acc': 0.3, 'loss': 21.7,
 *      'acceptance_rate_0': …, 'acceptance_rate': 0.28, 'grad_norm': 3.1, 'lr': 9.5e-05,
 *      'perf/optimizer_steps_per_hour': …, …}`
 *   SpecForge@a6b6b023:specforge/training/assembly.py:281-291 (the print),
 *   SpecForge@a6b6b023:specforge/training/controller.py:682-721 (when, and lr/perf keys),
 *   SpecForge@a6b6b023:specforge/training/controller.py:283-303,471-473 (EAGLE3's keys, in order).
 *   With `tracking.report_to` set, the same line carries `train/`-prefixed keys
 *   (SpecForge@a6b6b023:specforge/training/tracking.py:56-66,87-92). An eval line at the same
 *   step carries `eval/*` keys only (controller.py:729-735).
 * - tqdm (`Training:  50%|█████     | 8/16 [00:04<00:04,  1.99step/s]`, no postfix) only when
 *   stderr is a TTY, rank 0 (controller.py:572-592). A log file behind a pipe has none, so the
 *   total is not printed anywhere: the caller seeds `prev.totalSteps` from the config
 *   (`specforgeStopStep`).
 * - No line names a checkpoint: the caller reads the checkpoint directory
 *   (specforge-checkpoints.ts).
 * - Saving step S over a directory that already holds steps ≥ S logs a warning through a
 *   logger with no handler, so Python's last-resort handler writes the bare message to stderr:
 *   `rewinding checkpoint timeline at step 4: deleting /o/run-step4, /o/run-step8`
 *   (SpecForge@a6b6b023:specforge/training/checkpoint.py:109-120). It is not a step.
 *
 * Chunks may start or end anywhere; an unfinished line is carried in `partial`.
 */
import { keepPartial, readChunk } from './log-chunk.js';
import type { TrainProgress } from './progress.js';

export interface CliTrainProgress extends TrainProgress {
  lr?: number;
  gradNorm?: number;
  acceptanceRate?: number;
  /** The last rewind warning's message: checkpoints at or after that step were deleted. */
  rewound?: string;
}

// `step N: {…}` — the dict; anchored on the brace so `…at step 4: deleting` never matches. A
// metrics dict holds floats and lists only, never a brace, so `[^{}]*` ends at its own `}` and
// two ranks' prints run together on one line (`step 3: {…}step 3: {…}`: print writes the text and
// its newline separately, SpecForge@a6b6b023:specforge/training/assembly.py:291) still read.
const DICT = /(?:^|[^\w/])step (\d+): \{([^{}]*)\}/g;
const METER = /Training:\s*\d+%\|[^|\r\n]*\|\s*(\d+)\/(\d+)\s*\[/;
const REWIND = /rewinding checkpoint timeline at step (\d+): deleting .*/;
// Python float repr (`0.5`, `1e-05`, `-inf`, `nan`) or a list of them; keys are single-quoted.
const FLOAT = '-?(?:\\d+(?:\\.\\d*)?(?:e[-+]?\\d+)?|inf|nan)';
const ENTRY = new RegExp(`'((?:[^'\\\\]|\\\\.)*)': (\\[(?:\\s*${FLOAT}\\s*,?)*\\]|${FLOAT})`, 'g');

const pyFloat = (s: string): number =>
  s === 'nan' || s === '-nan' ? NaN : s === 'inf' ? Infinity : s === '-inf' ? -Infinity : Number(s);

/** The dict's entries; a list value (eval's per-position accuracy) becomes number[]. */
export function parsePythonMetricDict(body: string): Record<string, number | number[]> {
  const out: Record<string, number | number[]> = {};
  ENTRY.lastIndex = 0;
  let m: RegExpExecArray | null;
  while ((m = ENTRY.exec(body)) !== null) {
    const v = m[2]!;
    out[m[1]!] = v.startsWith('[')
      ? v
          .slice(1, -1)
          .split(',')
          .map((x) => x.trim())
          .filter(Boolean)
          .map(pyFloat)
      : pyFloat(v);
  }
  return out;
}

function scalar(d: Record<string, number | number[]>, key: string): number | undefined {
  const v = d[key] ?? d[`train/${key}`];
  return typeof v === 'number' ? v : undefined;
}

/** Mean of `<base>_0`, `<base>_1`, … when the pooled key is absent (a custom strategy). */
function positionalMean(d: Record<string, number | number[]>, base: string): number | undefined {
  const vals: number[] = [];
  for (let i = 0; ; i++) {
    const v = scalar(d, `${base}_${i}`);
    if (v === undefined) break;
    vals.push(v);
  }
  return vals.length ? vals.reduce((a, b) => a + b, 0) / vals.length : undefined;
}

function applyDictLine(p: CliTrainProgress, step: number, body: string): void {
  const d = parsePythonMetricDict(body);
  const keys = Object.keys(d);
  // An eval line (controller.py:733-734) reports the step already logged; its eval/* values
  // are not training loss or accuracy.
  if (keys.length > 0 && keys.every((k) => k.startsWith('eval/'))) return;
  p.step = step;
  // `acc` is EAGLE3's pooled accuracy over every TTT position (controller.py:291); `loss` the
  // ploss_decay-weighted sum of position losses (controller.py:292-297).
  const loss = scalar(d, 'loss');
  const acc = scalar(d, 'acc') ?? positionalMean(d, 'acc');
  const lr = scalar(d, 'lr');
  const gradNorm = scalar(d, 'grad_norm');
  const acceptance = scalar(d, 'acceptance_rate') ?? positionalMean(d, 'acceptance_rate');
  if (loss !== undefined) p.loss = loss;
  if (acc !== undefined) p.acc = acc;
  if (lr !== undefined) p.lr = lr;
  if (gradNorm !== undefined) p.gradNorm = gradNorm;
  if (acceptance !== undefined) p.acceptanceRate = acceptance;
}

/** One carriage-return segment of a line: a meter, a dict line, a rewind warning, or noise. */
function applySegment(p: CliTrainProgress, seg: string, complete: boolean): void {
  const meter = METER.exec(seg);
  if (meter) {
    p.step = Number(meter[1]);
    p.totalSteps = Number(meter[2]);
  }
  if (!complete) return;
  // On a TTY the meter and a print can share one physical line: read what follows the meter.
  const rest = meter ? seg.slice(seg.indexOf(']', meter.index) + 1) : seg;
  let dicts = 0;
  for (const dict of rest.matchAll(DICT)) {
    applyDictLine(p, Number(dict[1]), dict[2]!);
    dicts++;
  }
  if (dicts) return;
  const rewind = REWIND.exec(rest);
  if (rewind) p.rewound = rewind[0].trim();
}

export function parseSpecforgeProgress(text: string, prev?: CliTrainProgress): CliTrainProgress {
  const { p, complete, tail } = readChunk(text, prev);
  const lines = complete.split('\n');
  lines.pop();
  for (const line of lines) for (const seg of line.split('\r')) applySegment(p, seg, true);

  // An unfinished line: only a closed meter counts; keep from its last carriage return.
  for (const seg of tail.split('\r')) applySegment(p, seg, false);
  return keepPartial(p, tail);
}

export interface SpecforgeSchedule {
  /** Feature files the offline reader finds (every rank reads them all, then shards). */
  samples: number;
  worldSize: number;
  batchSize: number;
  accumulationSteps: number;
  numEpochs: number;
  maxSteps?: number | null;
  tpSize?: number;
  /** training.attention_backend === 'usp' with its sequence-parallel sizes. */
  usp?: { ulysses: number; ring: number };
}

/**
 * The optimizer step a HEAD offline run stops at (the step its last dict line and final
 * checkpoint carry): `max_steps` when the data lasts that long, else the data's end.
 * Each data-parallel rank gets ceil(samples / dp) refs, padded like DistributedSampler
 * (SpecForge@a6b6b023:specforge/launch.py:219-239), batches drop the last partial one
 * (trainer.py:151), and accumulation spans epochs (schedule.py:28-29, controller.py:753-754).
 * Under USP one logical sample spans sp ranks and accumulation is multiplied by sp
 * (assembly.py:541-543). Not `training.total_steps`: that is only the LR horizon
 * (schedule.py:18-19, controller.py:537-540).
 */
export function specforgeStopStep(s: SpecforgeSchedule): number {
  const sp = s.usp ? s.usp.ulysses * s.usp.ring : 1;
  const dp = Math.max(1, Math.floor(s.worldSize / (s.usp ? sp : (s.tpSize ?? 1))));
  const perRank = Math.ceil(s.samples / dp);
  const micro = Math.floor(perRank / s.batchSize) * s.numEpochs;
  const dataSteps = Math.floor(micro / (s.accumulationSteps * sp));
  return s.maxSteps != null ? Math.min(s.maxSteps, dataSteps) : dataSteps;
}
