/**
 * Is each launcher what it claims to be (incident 1)? The program exists on the host; a
 * `python -m` launcher's interpreter imports its module; a script's entry point exists and the
 * Python behind it imports torch. Each problem names the field and what to point it at.
 */
import type { Host } from '../hosts/host.js';
import { moduleLaunch } from '../stages/extract/index.js';
import { canImport, shebangPython, which, type Findings } from './preflight-probes.js';

/** The Python script a launcher runs (`torchrun ... train.py`, `python train.py`), if any. */
export function launcherScript(launcher: readonly string[]): string | null {
  if (moduleLaunch(launcher)) return null;
  // Template placeholders ({output_dir}/...) are filled in at launch; only literal paths are checked.
  return launcher.slice(1).find((a) => /\.py$/.test(a) && !a.startsWith('-') && !a.includes('{')) ?? null;
}

export async function checkLauncher(
  host: Host,
  launcher: readonly string[],
  field: string,
  expectModule: string | null,
  cwd: string,
  out: Findings,
): Promise<void> {
  const program = launcher[0]!;
  const resolved = await which(host, program);
  if (!resolved) {
    out.problems.push(
      `${field}: "${program}" is not an executable on ${host.name}. Fix: use the absolute path of the program in the environment where it is installed`,
    );
    return;
  }
  const mod = moduleLaunch(launcher);
  if (mod) {
    if (!(await canImport(host, mod.interpreter, mod.module))) {
      out.problems.push(
        `${field}: ${resolved} cannot import ${mod.module} on ${host.name} — the wrong interpreter (incident 1: "No module named ${mod.module}"). ` +
          `Fix: point ${field} at the Python of the environment where ${mod.module.split('.')[0]} is installed, e.g. /opt/venv/bin/python`,
      );
    } else out.checks.push(`${field}: ${resolved} imports ${mod.module}`);
    return;
  }
  const script = launcherScript(launcher);
  if (script) {
    const path = script.startsWith('/') ? script : `${cwd}/${script}`;
    if (!(await host.stat(path))) {
      out.problems.push(
        `${field}: the entry point ${script} does not exist on ${host.name}${script.startsWith('/') ? '' : ` (relative paths resolve in the run's ${cwd})`}. Fix: give its absolute path, e.g. /opt/SpecForge/scripts/train_eagle3.py`,
      );
      return;
    }
    const python = /python[\d.]*$/.test(program) ? resolved : await shebangPython(host, resolved);
    if (python && !(await canImport(host, python, 'torch'))) {
      out.problems.push(
        `${field}: ${python} (the interpreter behind ${program}) cannot import torch on ${host.name}. Fix: use the ${program} of the environment where the trainer is installed`,
      );
      return;
    }
    out.checks.push(`${field}: ${resolved} runs ${path}`);
  } else if (expectModule)
    out.checks.push(`${field}: ${resolved} exists (not a python -m launcher: ${expectModule} not probed)`);
  else out.checks.push(`${field}: ${resolved} exists`);
}
