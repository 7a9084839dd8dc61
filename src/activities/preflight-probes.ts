/**
 * How preflight asks the host: every probe answers, and none throws, because preflight lists
 * all problems at once rather than stopping at the first host that does not answer.
 */
import type { Host } from '../hosts/host.js';

/** What a check found: what holds (checks) and what must change before the run (problems). */
export interface Findings {
  checks: string[];
  problems: string[];
}

/** A command's result; a host that cannot run it reads as a failed command (code -1). */
export async function tryExec(
  host: Host,
  argv: string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return host.exec(argv, { timeoutMs: 60_000 }).catch((e: Error) => ({ code: -1, stdout: '', stderr: e.message }));
}

/** The absolute path a program name resolves to on the host, or null. */
export async function which(host: Host, program: string): Promise<string | null> {
  const r = await tryExec(host, ['sh', '-c', 'command -v -- "$1"', 'sh', program]);
  return r.code === 0 && r.stdout.trim() ? r.stdout.trim() : null;
}

export async function canImport(host: Host, interpreter: string, module: string): Promise<boolean> {
  const probe = 'import importlib.util, sys\nsys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)';
  return (await tryExec(host, [interpreter, '-c', probe, module])).code === 0;
}

/** The interpreter on a launcher script's `#!` line (torchrun, accelerate, ...), when it is a Python. */
export async function shebangPython(host: Host, path: string): Promise<string | null> {
  const r = await tryExec(host, ['head', '-n', '1', '--', path]);
  const m = /^#!\s*(\S+)(?:\s+(\S+))?/.exec(r.stdout);
  if (!m) return null;
  const interp = m[1]!.endsWith('/env') ? m[2] : m[1];
  return interp && /python/.test(interp) ? interp : null;
}
