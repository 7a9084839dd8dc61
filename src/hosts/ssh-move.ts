/**
 * Host.moveFiles on an SSH host, shell side: fixed scripts move a whole batch, so a batch
 * costs one session channel (on a host whose login shell runs conda or pyenv init, ~100 ms)
 * instead of one exactly-once exec per file. MOVE_INTO_DIR takes the common shape (same
 * names, one destination dir) with a few processes for the whole group; MOVE_FILES takes
 * any pair, three or four processes each.
 *
 * Why the script is safe to simply run again (link.retrying does, after a drop) rather than
 * going through DurableExec's exactly-once protocol: when sshd's session dies, the first
 * run may go on for a while beside the second. Every step tolerates that. Each run stages
 * under its own temp name ($$ differs between live processes), the staged copy is complete
 * before it is renamed over the destination, and the source is removed only after the
 * rename — so "source gone" always means "destination whole", and a run that finds the
 * source gone and the destination there reports the move done. Two runs racing on one
 * file each put identical bytes in place; neither can expose a partial file or drop one.
 */
import type { FileMove, MoveOutcome } from './host.js';

/**
 * $1 $2, $3 $4, … pairs of from and to. One line per pair on stdout, in order: "ok", or
 * "err <message>". `ln` makes the staged name without copying when both sides share a
 * filesystem (and fails, without copying, when they do not — unlike `mv`, which would copy
 * straight into the destination); otherwise `dd conv=fsync` copies and flushes in one process.
 */
export const MOVE_FILES = [
  'aerie_mv() {',
  '  [ -e "$3" ] || [ -L "$3" ] && rm -f -- "$3"',
  '  if ln -- "$1" "$3" 2>/dev/null || dd if="$1" of="$3" bs=4M conv=fsync status=none; then',
  '    mv -f -T -- "$3" "$2" && rm -f -- "$1" && return 0',
  '  fi',
  '  rm -f -- "$3"; return 1',
  '}',
  'while [ $# -ge 2 ]; do',
  '  f=$1; t=$2; shift 2',
  '  e=',
  '  if [ -e "$f" ]; then e=$(aerie_mv "$f" "$t" "${t%/*}/.${t##*/}.$$.aerie-mv" 2>&1) && { echo ok; continue; }',
  '  else e="no such file: $f"; fi',
  // Moved by an earlier run of this same batch (see above), or by this one's aerie_mv whose rm said something.
  '  if [ ! -e "$f" ] && [ -f "$t" ]; then echo ok; continue; fi',
  `  printf 'err %s\\n' "$(printf '%s' "$e" | tr '\\n' ' ')"`,
  'done',
  'exit 0',
].join('\n');

/**
 * The common case in one go: $1 a directory, $2… sources to move into it under their own
 * names (the extraction's dumps: <dump dir>/<id>.hs → rows_…/<id>.hs). A handful of
 * processes for the whole group instead of three or four per file — cp, sync and mv each
 * take every file at once. Staged in a fresh directory inside $1 (mktemp: its own per
 * run, on $1's filesystem so the final renames are atomic); sources go only after every
 * staged copy is whole, flushed and renamed into place. One line per source: "ok", or
 * "retry" (not done here; MOVE_FILES then does it, or says why not).
 */
export const MOVE_INTO_DIR = [
  'd=$1; shift',
  's=$(mktemp -d -- "$d/.aerie-mv.XXXXXX") || exit 3',
  // Same filesystem: hard links, no bytes copied (an exec prefix leaves no SFTP rename).
  'if { ln -- "$@" "$s/" 2>/dev/null || { rm -f -- "$s"/*; cp -- "$@" "$s/" && sync -- "$s"/*; }; } && mv -f -t "$d" -- "$s"/*; then',
  '  rm -f -- "$@"',
  'fi',
  'rm -rf -- "$s"',
  'for f do',
  '  if [ ! -e "$f" ] && [ -f "$d/${f##*/}" ]; then echo ok; else echo retry; fi',
  'done',
  'exit 0',
].join('\n');

/**
 * The remote command reaches the host as one argument of the login shell's -c, which Linux
 * caps at 128 KiB (MAX_ARG_STRLEN); batches are cut well below that.
 */
export const MOVE_ARG_BYTES = 60_000;

/** Consecutive runs of moves whose paths (quoted, with slack) fit in maxBytes; a lone longer move still gets its own run. */
export function chunkMoves(moves: readonly FileMove[], maxBytes = MOVE_ARG_BYTES): FileMove[][] {
  const chunks: FileMove[][] = [];
  let current: FileMove[] = [];
  let bytes = 0;
  for (const m of moves) {
    // Quoting can grow a path up to 4x (each ' becomes '\''); count the worst case.
    const size = 4 * (Buffer.byteLength(m.from) + Buffer.byteLength(m.to)) + 8;
    if (current.length > 0 && bytes + size > maxBytes) {
      chunks.push(current);
      current = [];
      bytes = 0;
    }
    current.push(m);
    bytes += size;
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * Which moves can go through MOVE_INTO_DIR: same name at both ends, not hidden (the script's
 * glob would miss it), one source per name per directory; groups of at least two (a single
 * file gains nothing). Everything else goes alone through MOVE_FILES. Indexes into moves.
 */
export function planMoves(moves: readonly FileMove[]): { groups: { dir: string; items: number[] }[]; singles: number[] } {
  const byDir = new Map<string, { names: Set<string>; items: number[] }>();
  const singles: number[] = [];
  moves.forEach((m, i) => {
    const cut = m.to.lastIndexOf('/');
    const dir = m.to.slice(0, cut);
    const name = m.to.slice(cut + 1);
    const g = byDir.get(dir) ?? { names: new Set<string>(), items: [] };
    if (cut <= 0 || name === '' || name.startsWith('.') || m.from.slice(m.from.lastIndexOf('/') + 1) !== name || g.names.has(name)) {
      singles.push(i);
      return;
    }
    g.names.add(name);
    g.items.push(i);
    byDir.set(dir, g);
  });
  const groups: { dir: string; items: number[] }[] = [];
  for (const [dir, g] of byDir) {
    if (g.items.length >= 2) groups.push({ dir, items: g.items });
    else singles.push(...g.items);
  }
  return { groups, singles: singles.sort((a, b) => a - b) };
}

/** MOVE_INTO_DIR's stdout: true per source it moved, false for one to retry alone. */
export function parseIntoDirOutput(text: string, count: number): boolean[] {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  if (lines.length !== count || lines.some((l) => l !== 'ok' && l !== 'retry')) {
    throw new Error(`the move script reported ${JSON.stringify(text.slice(0, 200))} for ${count} moves`);
  }
  return lines.map((l) => l === 'ok');
}

/** MOVE_FILES's stdout as outcomes; anything but exactly one ok/err line per move is an error. */
export function parseMoveOutput(text: string, count: number): MoveOutcome[] {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  if (lines.length !== count) throw new Error(`the move script reported ${lines.length} results for ${count} moves`);
  return lines.map((line) => {
    if (line === 'ok') return { ok: true };
    if (line.startsWith('err ')) return { ok: false, error: line.slice(4).trim() || 'move failed' };
    throw new Error(`unexpected move script output: ${line.slice(0, 200)}`);
  });
}
