/**
 * The shell side of SshHost, as text. Every remote operation is one fixed POSIX script run
 * as `[exec-prefix...] /bin/sh -c <script> sh <args...>`: values (paths, argv, env) only
 * ever travel as positional arguments, each quoted by hosts/util/shell-quote.ts, and the script reads
 * them as "$1"… — so nothing from a config can become shell syntax on the host.
 */
import type { FileStat } from '../host.js';
import { assertEnvName, shJoin } from '../util/index.js';

/** Exit status the file scripts use for "no such file or directory". */
export const EXIT_ABSENT = 44;
/** Exit status for "that is a directory". */
export const EXIT_IS_DIR = 45;

/** The command line sshd hands to the login shell. */
export function remoteCommand(
  script: string,
  args: readonly (string | number)[],
  execPrefix: readonly string[] = [],
): string {
  return `exec ${shJoin([...execPrefix, '/bin/sh', '-c', script, 'sh', ...args.map(String)])}`;
}

export const READ_FILE = `[ -e "$1" ] || exit ${EXIT_ABSENT}; [ -d "$1" ] && exit ${EXIT_IS_DIR}; exec cat -- "$1"`;

/** $1 target, $2 temp name beside it, $3 "private" for mode 0600; data on stdin. */
export const WRITE_ATOMIC = [
  `d=$(dirname -- "$1"); [ -d "$d" ] || exit ${EXIT_ABSENT}`,
  '[ "$3" = private ] && umask 077',
  'cat > "$2" || { rm -f -- "$2"; exit 1; }',
  // fsync the data before the rename makes it visible (coreutils sync takes files since 8.24).
  'sync -- "$2" 2>/dev/null',
  'mv -f -- "$2" "$1" || { rm -f -- "$2"; exit 1; }',
  'sync -- "$d" 2>/dev/null; exit 0',
].join('\n');

/**
 * $1 path, $2 the size the file had before this append; data on stdin. Truncating back to
 * $2 first makes a retried append (after a dropped connection) write its bytes once.
 */
export const APPEND_AT = [
  'if [ -e "$1" ]; then truncate -s "$2" -- "$1" || exit 1',
  `else [ -d "$(dirname -- "$1")" ] || exit ${EXIT_ABSENT}; fi`,
  'exec cat >> "$1"',
].join('\n');

/** size, type letter (f, d, l = broken link), mtime in seconds with fraction. */
export const STAT = `[ -e "$1" ] || exit ${EXIT_ABSENT}; exec find -L "$1" -maxdepth 0 -printf '%s %y %T@\\n'`;

/** One NUL-terminated "size type mtime name" record per entry. */
export const LIST = `[ -d "$1" ] || exit ${EXIT_ABSENT}; cd -- "$1" && exec find -L . -mindepth 1 -maxdepth 1 -printf '%s %y %T@ %P\\0'`;

/** $1 path, $2 offset, $3 max bytes: "absent", or the effective offset on the first line, then the bytes. */
export const TAIL_FROM = [
  `[ -e "$1" ] || { echo absent; exit 0; }`,
  'size=$(stat -L -c %s -- "$1") || exit 1',
  'from=$2; [ "$size" -lt "$from" ] && from=0',
  `printf '%s\\n' "$from"`,
  '[ "$size" -gt "$from" ] || exit 0',
  'tail -c +$((from + 1)) -- "$1" | head -c "$3"',
].join('\n');

export const MKDIR_P = 'exec mkdir -p -- "$1"';
/** rename(2) semantics: the target is replaced, never moved into. */
export const RENAME = 'exec mv -f -T -- "$1" "$2"';
export const REMOVE = 'exec rm -rf -- "$1"';
/** Free blocks for unprivileged users × block size. */
export const FREE_BYTES = `[ -e "$1" ] || exit ${EXIT_ABSENT}; exec stat -f -L -c '%a %S' -- "$1"`;

/** $1 pid, $2 exit file: the leader's stat line, a marker, and the exit file. */
export const PROC_STATUS = `cat "/proc/$1/stat" 2>/dev/null; printf '\\n#exit\\n'; cat -- "$2" 2>/dev/null && printf '\\n#present\\n'; exit 0`;

/** Every launch record in $1 as "path\\0content\\0". */
export const READ_RECORDS = `for f in "$1"/*.json; do [ -f "$f" ] || continue; printf '%s\\0' "$f"; cat -- "$f"; printf '\\0'; done; exit 0`;

/** The pid holding socket inode $1 and its command line, from /proc/<pid>/fd links. */
export const SOCKET_OWNER = [
  'for p in /proc/[0-9]*; do',
  '  for f in "$p"/fd/*; do',
  '    [ "$(readlink "$f" 2>/dev/null)" = "socket:[$1]" ] || continue',
  `    printf '%s\\n' "\${p#/proc/}"; tr '\\0' ' ' < "$p/cmdline"; exit 0`,
  '  done',
  'done; exit 0',
].join('\n');

/** `cat <file>` with a marker when absent, for polling small files (pid files, exit files). */
export const CAT_IF_PRESENT = `[ -e "$1" ] || { printf absent; exit 0; }; printf 'present\\n'; exec cat -- "$1"`;

export function parseStatLine(path: string, text: string): FileStat | null {
  const m = /^(\d+) (\w) ([\d.]+)\s*$/.exec(text.trim());
  if (!m || m[2] === 'l') return null;
  return { path, size: Number(m[1]), isDirectory: m[2] === 'd', mtimeMs: Math.round(Number(m[3]) * 1000) };
}

export function parseListing(dir: string, out: Buffer): FileStat[] {
  const base = dir.endsWith('/') ? dir : `${dir}/`;
  const entries: FileStat[] = [];
  for (const rec of out.toString('utf8').split('\0')) {
    const m = /^(\d+) (\w) ([\d.]+) ([\s\S]+)$/.exec(rec);
    if (!m) continue;
    const st = parseStatLine(`${base}${m[4]}`, `${m[1]} ${m[2]} ${m[3]}`);
    if (st) entries.push(st);
  }
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/** TAIL_FROM's output: null when the file is absent. */
export function parseTail(out: Buffer): { from: number; data: Buffer } | null {
  const nl = out.indexOf(0x0a);
  const head = (nl < 0 ? out : out.subarray(0, nl)).toString('latin1').trim();
  if (head === 'absent') return null;
  const from = Number(head);
  if (!Number.isSafeInteger(from)) throw new Error(`unexpected tail output: ${head.slice(0, 80)}`);
  return { from, data: nl < 0 ? Buffer.alloc(0) : out.subarray(nl + 1) };
}

export function parseFreeBytes(text: string): number {
  const m = /^(\d+) (\d+)\s*$/.exec(text.trim());
  if (!m) throw new Error(`unexpected stat -f output: ${text.trim().slice(0, 80)}`);
  return Number(m[1]) * Number(m[2]);
}

export function parseProcStatus(text: string): { statLine: string | null; exitText: string | null } {
  const at = text.lastIndexOf('\n#exit\n');
  const statPart = at < 0 ? text : text.slice(0, at);
  const rest = at < 0 ? '' : text.slice(at + '\n#exit\n'.length);
  const present = rest.endsWith('\n#present\n');
  return {
    statLine: statPart.trim() === '' ? null : statPart,
    exitText: present ? rest.slice(0, -'\n#present\n'.length) : null,
  };
}

export function parseRecords(out: Buffer): { path: string; text: string }[] {
  const parts = out.toString('utf8').split('\0');
  const records: { path: string; text: string }[] = [];
  for (let i = 0; i + 1 < parts.length; i += 2) records.push({ path: parts[i]!, text: parts[i + 1]! });
  return records;
}

export function parseSocketOwner(text: string): { pid: number; command?: string } | null {
  const nl = text.indexOf('\n');
  const pid = Number((nl < 0 ? text : text.slice(0, nl)).trim());
  if (!Number.isSafeInteger(pid) || pid <= 0) return null;
  const command = nl < 0 ? '' : text.slice(nl + 1).trim();
  return { pid, command: command || undefined };
}

export function parseCatIfPresent(out: Buffer): Buffer | null {
  if (out.toString('latin1', 0, 7) !== 'present') return null;
  return out.subarray(out.indexOf(0x0a) + 1);
}

/** "NAME=value" words for the exec script's export loop (names checked, values inert). */
export function envWords(env: Record<string, string> | undefined): string[] {
  if (!env) return [];
  return Object.keys(env)
    .sort()
    .map((name) => {
      assertEnvName(name);
      return `${name}=${env[name]}`;
    });
}
