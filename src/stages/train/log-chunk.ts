/**
 * How each training-log parser (progress.ts, specforge-progress.ts) takes a chunk of a log that
 * is still growing: chunks start and end anywhere, so the previous call's unfinished line is
 * joined to the new text, only complete lines are counted, and what follows the last newline is
 * carried to the next call.
 */

const MAX_PARTIAL = 4096;

export interface LogChunk<P> {
  /** A copy of the previous progress (or a fresh one), its line count advanced. */
  p: P;
  /** The previous call's unfinished line followed by the new text. */
  all: string;
  /** `all` through its last newline. */
  complete: string;
  /** What follows: a line not finished yet. */
  tail: string;
}

export function readChunk<P extends { lines: number; partial?: string }>(text: string, prev?: P): LogChunk<P> {
  const p = { ...(prev ?? { lines: 0 }) } as P;
  const all = (prev?.partial ?? '') + text;
  const cut = all.lastIndexOf('\n') + 1;
  const complete = all.slice(0, cut);
  p.lines = (prev?.lines ?? 0) + (complete.match(/\n/g)?.length ?? 0);
  return { p, all, complete, tail: all.slice(cut) };
}

/** Carry the unfinished line in `p.partial`, from its last meter boundary (\r), never more than a few KiB. */
export function keepPartial<P extends { partial?: string }>(p: P, tail: string): P {
  const cr = tail.lastIndexOf('\r');
  const kept = cr >= 0 ? tail.slice(cr + 1) : tail;
  p.partial = kept.length > MAX_PARTIAL ? kept.slice(-MAX_PARTIAL) : kept;
  if (!p.partial) delete p.partial;
  return p;
}
