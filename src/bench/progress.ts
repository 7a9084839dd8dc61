// The benchmark's progress line for the CLI's live table, from the sweep's heartbeat
// details (SweepProgress): a bar for the level being measured and the levels done.
// Pure, so the rendering is golden-tested; details come from another process and may
// be partial or from an older worker, so every field is checked.

const BAR = 20;
const EIGHTHS = ['', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];

/** A fixed-width bar, e.g. `▕████████▌           ▏` for 0.43. */
export function progressBar(fraction: number, width = BAR): string {
  const f = Number.isFinite(fraction) ? Math.min(1, Math.max(0, fraction)) : 0;
  const eighths = Math.round(f * width * 8);
  const full = Math.floor(eighths / 8);
  const part = full < width ? EIGHTHS[eighths % 8]! : '';
  return `▕${'█'.repeat(full)}${part}${' '.repeat(width - full - (part ? 1 : 0))}▏`;
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

function compact(tokS: number): string {
  return tokS >= 10_000
    ? `${(tokS / 1000).toFixed(0)}k`
    : tokS >= 1000
      ? `${(tokS / 1000).toFixed(1)}k`
      : tokS.toFixed(0);
}

/** `eagle3 level 4/8, concurrency 10 ▕███▌ ▏ 12/20 requests` and, on a second line, the finished levels' output tok/s. */
export function renderSweepProgress(details: unknown, indent = '      '): string {
  const d = (details ?? {}) as Record<string, unknown>;
  const variant = typeof d.variant === 'string' ? d.variant : 'benchmark';
  const concurrency = num(d.concurrency);
  if (concurrency === undefined) return `${variant} sweep starting`;
  const level = num(d.level);
  const levels = num(d.levels);
  const done = num(d.done) ?? 0;
  const total = num(d.total);
  const where =
    level !== undefined && levels !== undefined
      ? `level ${level}/${levels}, concurrency ${concurrency}`
      : `concurrency ${concurrency}`;
  const count = total !== undefined ? ` ${done}/${total} requests` : '';
  let text = `${variant} ${where} ${progressBar(total ? done / total : 0)}${count}`;
  const finished = Array.isArray(d.finished) ? (d.finished as Record<string, unknown>[]) : [];
  const parts = finished
    .map((f) => {
      const c = num(f.concurrency);
      const t = num(f.outputThroughput);
      if (c === undefined || t === undefined) return undefined;
      const accept = num(f.acceptLength);
      const errors = num(f.errors) ?? 0;
      return `c${c} ${compact(t)}${accept !== undefined ? ` (α ${accept.toFixed(2)})` : ''}${errors > 0 ? ` ${errors} failed` : ''}`;
    })
    .filter((p): p is string => p !== undefined);
  if (parts.length > 0) text += `\n${indent}done, output tok/s: ${parts.join(' · ')}`;
  return text;
}
