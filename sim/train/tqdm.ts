/**
 * tqdm's progress meter as train_eagle3.py shows it: `tqdm(loader, desc="Training Epoch {e}",
 * leave=True)` plus `set_postfix({"loss": "..", "acc": "..", "time": "..s"})`. tqdm writes to
 * stderr, each refresh starting with a carriage return, and ends the bar with a newline when it
 * closes; in a log file that is one long line of \r-separated meters per epoch.
 */

export interface MeterState {
  desc: string;
  n: number;
  total: number;
  elapsedS: number;
  postfix?: Record<string, string>;
}

/** tqdm.format_interval: M:SS under an hour (zero-padded to MM:SS), H:MM:SS above. */
export function formatInterval(seconds: number): string {
  const t = Math.floor(seconds);
  const h = Math.floor(t / 3600);
  const m = Math.floor((t % 3600) / 60);
  const s = t % 60;
  const mm = String(m).padStart(2, '0');
  const ss = String(s).padStart(2, '0');
  return h ? `${h}:${mm}:${ss}` : `${mm}:${ss}`;
}

const BAR_CHARS = ' ▏▎▍▌▋▊▉█';
const BAR_WIDTH = 10; // tqdm's width when it cannot size the terminal (a log file)

export function formatBar(frac: number): string {
  const syms = BAR_CHARS.length - 1;
  const units = Math.floor(Math.min(1, Math.max(0, frac)) * BAR_WIDTH * syms);
  const full = Math.floor(units / syms);
  const part = units % syms;
  if (full >= BAR_WIDTH) return BAR_CHARS[syms].repeat(BAR_WIDTH);
  return BAR_CHARS[syms].repeat(full) + BAR_CHARS[part] + ' '.repeat(BAR_WIDTH - full - 1);
}

const fixed5 = (x: number): string => x.toFixed(2).padStart(5);

/** One meter, without the leading \r. */
export function formatMeter(st: MeterState): string {
  const { desc, n, total, elapsedS } = st;
  const rate = elapsedS > 0 && n > 0 ? n / elapsedS : 0;
  let rateFmt = '?it/s';
  if (rate) rateFmt = 1 / rate > 1 ? `${fixed5(1 / rate)}s/it` : `${fixed5(rate)}it/s`;
  const remaining = rate ? formatInterval((total - n) / rate) : '?';
  const pct = total ? Math.round((100 * n) / total) : 0;
  const postfix = st.postfix
    ? Object.entries(st.postfix)
        .map(([k, v]) => `, ${k}=${v}`)
        .join('')
    : '';
  return `${desc}: ${String(pct).padStart(3)}%|${formatBar(total ? n / total : 0)}| ${n}/${total} [${formatInterval(elapsedS)}<${remaining}, ${rateFmt}${postfix}]`;
}
