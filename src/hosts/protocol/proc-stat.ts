/**
 * Parsing /proc/<pid>/stat. The second field is the command name in parentheses, and that
 * name is chosen by the process (up to 15 bytes, any characters: spaces, ')' and even
 * newlines), so fields are counted from the LAST ')' rather than split on spaces.
 */

export interface ProcStat {
  pid: number;
  comm: string;
  /** R, S, D, Z (zombie), T, t, X, I, ... */
  state: string;
  ppid: number;
  pgrp: number;
  session: number;
  /** Field 22: start time in clock ticks since boot, kept as text (it can exceed 2^53 in principle). */
  startTime: string;
}

/** One stat line, or null when the text is not a stat line. */
export function parseProcStat(text: string): ProcStat | null {
  const open = text.indexOf(' (');
  const close = text.lastIndexOf(')');
  if (open <= 0 || close < open) return null;
  const pid = Number(text.slice(0, open));
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  const comm = text.slice(open + 2, close);
  // After ')' come fields 3.. separated by single spaces; field N is rest[N - 3].
  const rest = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  if (rest.length < 20) return null;
  const [state, ppid, pgrp, session] = [rest[0], Number(rest[1]), Number(rest[2]), Number(rest[3])];
  const startTime = rest[19];
  if (!/^[A-Za-z]$/.test(state) || ![ppid, pgrp, session].every(Number.isSafeInteger) || !/^\d+$/.test(startTime))
    return null;
  return { pid, comm, state, ppid, pgrp, session, startTime };
}

/**
 * Many stat files concatenated (what `cat /proc/[0-9]*\/stat` prints over SSH). A record
 * starts at a line beginning "<digits> (", so a newline inside a command name does not
 * split its record; unparseable pieces (a process that vanished mid-read) are dropped.
 */
export function parseProcStats(text: string): ProcStat[] {
  const out: ProcStat[] = [];
  for (const piece of text.split(/\n(?=\d+ \()/)) {
    if (!piece.trim()) continue;
    const stat = parseProcStat(piece);
    if (stat) out.push(stat);
  }
  return out;
}

/** A zombie (or a dead task being reaped) runs nothing and holds nothing but its pid. */
export function isDead(stat: ProcStat): boolean {
  return stat.state === 'Z' || stat.state === 'X' || stat.state === 'x';
}
