/**
 * aerie's own Python for the GPU host (py/aerie_hs: tokens, capture plugin, converter,
 * self-check), copied there once per content version so the code a host runs is the code
 * this aerie was tested with. Nothing is installed: every command runs `python -m aerie_hs.X`
 * with the staged folder as its working directory (python -m puts the cwd first on sys.path,
 * so the host's own PYTHONPATH still applies), and the extraction server gets the folder on
 * its PYTHONPATH, where SGLang finds the plugin's dist-info.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ExecOptions, ExecResult, Host } from '../../hosts/host.js';

/** py/ in this aerie's tree: src/stages/common/ and dist/stages/common/ both sit three levels below the root. */
export const AERIE_PY_SOURCE = resolve(dirname(fileURLToPath(import.meta.url)), '../../../py');

export interface AeriePy {
  /** The staged folder on the host: aerie_hs/ and aerie_hs_capture-1.dist-info/. */
  root: string;
  /** First 12 hex of the package's sha256 (names the folder). */
  version: string;
  /** The interpreter that runs it (stages.extract.python). */
  python: string;
}

/** A failure of aerie's own Python on the host, with what it printed. */
export class AeriePyError extends Error {
  constructor(
    readonly module: string,
    readonly code: number | null,
    message: string,
  ) {
    super(message);
    this.name = 'AeriePyError';
  }
}

interface PackageFile {
  name: string;
  data: Buffer;
}

let cached: Promise<{ files: PackageFile[]; version: string }> | undefined;

/** The package's files and content version, read once per process. */
export function localPackage(): Promise<{ files: PackageFile[]; version: string }> {
  cached ??= (async () => {
    const dir = join(AERIE_PY_SOURCE, 'aerie_hs');
    const names = (await readdir(dir)).filter((n) => n.endsWith('.py')).sort();
    const files = await Promise.all(names.map(async (name) => ({ name, data: await readFile(join(dir, name)) })));
    const h = createHash('sha256');
    for (const f of files) h.update(`${f.name}\0${f.data.length}\0`).update(f.data);
    return { files, version: h.digest('hex').slice(0, 12) };
  })();
  return cached;
}

/** Stage the package on the host (once per version) and announce its plugin to SGLang. */
export async function shipAeriePy(host: Host, python: string): Promise<AeriePy> {
  const pkg = await localPackage();
  const root = `${host.workdir}/aerie-py/${pkg.version}`;
  const py: AeriePy = { root, version: pkg.version, python };
  const marker = `${root}/.complete`;
  if (await host.stat(marker)) return py;
  await host.mkdirp(`${root}/aerie_hs`);
  for (const f of pkg.files) await host.writeFileAtomic(`${root}/aerie_hs/${f.name}`, f.data);
  await runAeriePy(host, py, 'sglang_hook', ['plugin-dist', root]);
  // Written last: a folder without it is staged again, never half-used.
  await host.writeFileAtomic(marker, `${pkg.version}\n`);
  return py;
}

/**
 * `python -m aerie_hs.<module> args…` in the staged folder; a nonzero exit outside `okCodes`
 * throws with its stderr. `shell` (already quoted) runs instead through sh, for redirections.
 */
export async function runAeriePy(
  host: Host,
  py: AeriePy,
  module: string,
  args: string[],
  opts: ExecOptions & { okCodes?: number[]; shell?: string } = {},
): Promise<ExecResult> {
  const { okCodes = [0], shell, ...exec } = opts;
  const argv = shell !== undefined ? ['sh', '-c', shell] : [py.python, '-m', `aerie_hs.${module}`, ...args];
  const r = await host.exec(argv, { timeoutMs: 10 * 60_000, ...exec, cwd: py.root });
  if (r.code === null || !okCodes.includes(r.code)) {
    const missing =
      r.code === 127
        ? ` — ${py.python} is not on ${host.name}; set stages.extract.python to the target environment's interpreter`
        : '';
    // The modules print their refusal as JSON on stdout (selfcheck's exit 2) or text on stderr.
    const said = [r.stderr.trim(), r.stdout.trim()].filter(Boolean).join(' | ').slice(-800);
    throw new AeriePyError(
      module,
      r.code,
      `python -m aerie_hs.${module} on ${host.name} failed (exit ${r.code}): ${said}${missing}`,
    );
  }
  return r;
}
