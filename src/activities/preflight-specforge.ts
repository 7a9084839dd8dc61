/**
 * Which SpecForge the launchers reach, read on the host: the revision the train and extract
 * drivers follow comes from here (resolveRevision), and the extract launcher's
 * prepare_hidden_states.py must take the flag that revision passes.
 */
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { moduleLaunch } from '../stages/extract/index.js';
import {
  CLI_PROBE,
  detectFromCli,
  detectFromScript,
  parseCliProbe,
  parseRevParse,
  prepareAuxFlagIn,
  type Detection,
  SPECFORGE_PROFILES,
  type SpecforgeProfileId,
} from '../stages/common/index.js';
import { launcherScript } from './preflight-launchers.js';
import { shebangPython, tryExec, which, type Findings } from './preflight-probes.js';

/** `git rev-parse HEAD` of the checkout a file is in, when it is one. */
async function checkoutCommit(host: Host, dir: string): Promise<string | undefined> {
  const r = await tryExec(host, ['git', '-C', dir, 'rev-parse', 'HEAD']);
  return parseRevParse(r.code, r.stdout);
}

const dirOf = (p: string) => p.slice(0, Math.max(p.lastIndexOf('/'), 1));
const absolute = (p: string, cwd: string) => (p.startsWith('/') ? p : `${cwd}/${p}`);

/**
 * What SpecForge the train launcher reaches: the CLI through its interpreter (a `python -m`
 * launcher, or the `#!` of a `specforge` console script), the v0.2 scripts by reading the
 * train_eagle3.py it names. Undefined when there is nothing to probe (a non-Python launcher).
 */
export async function detectSpecforge(host: Host, config: Config, cwd: string): Promise<Detection | undefined> {
  const t = config.stages.train;
  if (t.driver === 'specforge-v0.2') {
    const script = launcherScript(t.launcher);
    if (!script) return undefined;
    const path = absolute(script, cwd);
    const source = await host.readFile(path).then(
      (b) => b.toString('utf8'),
      () => undefined,
    );
    if (source === undefined) return { evidence: `${path} unreadable` };
    return detectFromScript(path, source, await checkoutCommit(host, dirOf(path)));
  }
  if (t.driver !== 'specforge') return undefined;
  const mod = moduleLaunch(t.launcher);
  const resolved = mod ? mod.interpreter : await which(host, t.launcher[0]!);
  if (!resolved) return undefined;
  const python = mod || /python[\d.]*$/.test(resolved) ? resolved : await shebangPython(host, resolved);
  if (!python) return undefined;
  const r = await tryExec(host, [python, '-c', CLI_PROBE]);
  const probe = parseCliProbe(r.stdout);
  const schema = probe?.schema
    ? await host.readFile(probe.schema).then(
        (b) => b.toString('utf8'),
        () => undefined,
      )
    : undefined;
  const commit = probe?.package ? await checkoutCommit(host, probe.package) : undefined;
  return detectFromCli(probe, schema, python, commit);
}

/** The revision's prepare_hidden_states.py flag against the script the extract launcher names. */
export async function checkPrepareScript(
  host: Host,
  config: Config,
  cwd: string,
  profile: SpecforgeProfileId,
  out: Findings,
): Promise<void> {
  const e = config.stages.extract;
  if (e.driver !== 'specforge-offline') return;
  const script = launcherScript(e.launcher);
  if (!script) return;
  const source = await host.readFile(absolute(script, cwd)).then(
    (b) => b.toString('utf8'),
    () => undefined,
  );
  if (source === undefined) return;
  const has = prepareAuxFlagIn(source);
  const wants = SPECFORGE_PROFILES[profile].prepareAuxFlag;
  if (has === wants) out.checks.push(`stages.extract.launcher: ${script} takes ${wants}, as ${profile} expects`);
  else {
    out.problems.push(
      `stages.extract.launcher: ${script} ${has ? `takes ${has}` : 'takes neither --draft-model-config nor --enable-aux-hidden-states (a July 2026 revision before ca949555)'}, ` +
        `but the SpecForge revision ${profile} needs ${wants}. Fix: ${has ? 'point stages.extract.launcher at the prepare_hidden_states.py of the same SpecForge checkout as the trainer' : 'update that SpecForge checkout to ca949555 (2026-07-18) or later, where prepare_hidden_states.py takes --draft-model-config'}`,
    );
  }
}
