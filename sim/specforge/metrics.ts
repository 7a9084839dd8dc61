/**
 * HEAD's console progress line, `step N: {...}`: the EAGLE3 metric dict in the order HEAD builds
 * it, printed with Python's dict and float repr (SpecForge@a6b6b023:specforge/training/assembly.py:281-291).
 */

/** Python's repr(float): shortest round-trip digits, scientific below 1e-4 and from 1e16. */
export function pyFloatRepr(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (x === Infinity) return 'inf';
  if (x === -Infinity) return '-inf';
  if (x === 0) return Object.is(x, -0) ? '-0.0' : '0.0';
  const [mant, expS] = x.toExponential().split('e') as [string, string];
  const exp = Number(expS);
  const neg = mant.startsWith('-');
  const digits = mant.replace('-', '').replace('.', '');
  if (exp < -4 || exp >= 16) {
    const m = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
    return `${neg ? '-' : ''}${m}e${exp < 0 ? '-' : '+'}${String(Math.abs(exp)).padStart(2, '0')}`;
  }
  let s: string;
  if (exp < 0) s = `0.${'0'.repeat(-exp - 1)}${digits}`;
  else if (digits.length <= exp + 1) s = `${digits}${'0'.repeat(exp + 1 - digits.length)}.0`;
  else s = `${digits.slice(0, exp + 1)}.${digits.slice(exp + 1)}`;
  return `${neg ? '-' : ''}${s}`;
}

export function pyDictLine(step: number, metrics: [string, number][]): string {
  return `step ${step}: {${metrics.map(([k, v]) => `'${k}': ${pyFloatRepr(v)}`).join(', ')}}`;
}

export interface StepNumbers {
  /** Position-0 loss and accuracy from the simulator's learning curve. */
  loss0: number;
  acc0: number;
  ttt: number;
  gradNorm: number;
  lr: number;
  perf: { stepsPerHour: number; stepTimeS: number; dataWaitS: number; computeS: number; samplesPerS: number };
}

/**
 * The keys HEAD logs for EAGLE3, in order: acc_i, ploss_i, acc, loss, acceptance_rate_i,
 * acceptance_rate (controller.py:283-303), grad_norm (controller.py:471-473), lr and perf/*
 * (controller.py:683-720). A tracker prefixes train/ (tracking.py:56-66).
 */
export function eagle3Metrics(n: StepNumbers, tracked: boolean): [string, number][] {
  const acc = Array.from({ length: n.ttt }, (_, i) => n.acc0 * 0.9 ** i);
  const ploss = Array.from({ length: n.ttt }, (_, i) => n.loss0 * (1 + 0.05 * i));
  const accept = acc.map((a, i) => Math.min(1, a * (1.1 - 0.02 * i)));
  const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;
  const out: [string, number][] = [
    ...acc.map((v, i): [string, number] => [`acc_${i}`, v]),
    ...ploss.map((v, i): [string, number] => [`ploss_${i}`, v]),
    ['acc', mean(acc)],
    // ploss_decay 1.0: the weighted sum is the plain sum (controller.py:292-297).
    ['loss', ploss.reduce((a, b) => a + b, 0)],
    ...accept.map((v, i): [string, number] => [`acceptance_rate_${i}`, v]),
    ['acceptance_rate', mean(accept)],
    ['grad_norm', n.gradNorm],
    ['lr', n.lr],
    ['perf/optimizer_steps_per_hour', n.perf.stepsPerHour],
    ['perf/optimizer_step_time_s', n.perf.stepTimeS],
    ['perf/data_wait_time_s', n.perf.dataWaitS],
    ['perf/train_compute_time_s', n.perf.computeS],
    ['perf/durable_ack_time_s', 0],
    ['perf/global_samples_per_second', n.perf.samplesPerS],
  ];
  return tracked ? out.map(([k, v]) => [k.startsWith('train/') || k.startsWith('eval/') ? k : `train/${k}`, v]) : out;
}

/** Warmup then cosine decay, the shape of BF16Optimizer's default schedule (specforge/optimizer.py). */
export function scheduledLr(lr: number, step: number, total: number, warmupRatio: number): number {
  const warmup = Math.floor(warmupRatio * total);
  if (step < warmup) return (lr * step) / Math.max(1, warmup);
  const t = (step - warmup) / Math.max(1, total - warmup);
  return lr * 0.5 * (1 + Math.cos(Math.PI * Math.min(1, t)));
}
