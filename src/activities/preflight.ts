/**
 * Preflight: everything that can be known to be wrong before a model spends ten minutes
 * loading — the host reachable with a verified key, the interpreters (incident 1), the
 * port, foreign GPU users (incident 4), the paths, the disk, the drafter against the
 * algorithm (incident 3). All problems are reported at once, each saying what to change.
 * `aerie doctor` runs the same checks without Temporal. The longer checks sit beside this
 * file, one concern each (preflight-launchers, -specforge, -capture, -disk), with the host
 * probes they share (preflight-probes).
 */
import { runGpus } from '../config/gpus.js';
import type { Config } from '../config/schema.js';
import { portHolderOf } from './server-watch.js';
import type { GpuInventory, GpuProcess, Host } from '../hosts/host.js';
import { SshConnectError, SshTrustError, SshHost } from '../hosts/index.js';
import { checkDrafterCompat } from '../sglang/drafter-check.js';
import { moduleLaunch } from '../stages/extract/index.js';
import { resolveRevision, type SpecforgeProfileId } from '../stages/common/index.js';
import { runDir } from '../shared.js';
import { checkCapture, checkRelease } from './preflight-capture.js';
import { checkDisk } from './preflight-disk.js';
import { checkLauncher } from './preflight-launchers.js';
import type { Findings } from './preflight-probes.js';
import { checkPrepareScript, detectSpecforge } from './preflight-specforge.js';
import type { SglangRelease } from './server-launches.js';
import { fatal, type ActivityDeps, type RunRef } from './context.js';

export interface PreflightReport extends Findings {
  host: string;
  /** The SpecForge revision the train and extract drivers follow (SpecForge drivers only). */
  specforge?: { profile: SpecforgeProfileId; evidence: string };
  sglang?: SglangRelease; // resolved once for the run; launchServer renders for it
}

export { moduleLaunch };
export { estimateDisk, type DiskEstimate } from './preflight-disk.js';
export { launcherScript } from './preflight-launchers.js';

async function readJson(host: Host, path: string): Promise<unknown | undefined> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Can the host be reached at all? An SSH host says through which key. */
async function checkReachable(host: Host, out: PreflightReport): Promise<boolean> {
  const where = host instanceof SshHost ? await host.describe().catch(() => host.name) : host.name;
  try {
    const r = await host.exec(['true'], { timeoutMs: 60_000 });
    if (r.code !== 0) throw new Error(`\`true\` exited ${r.code}: ${r.stderr.trim()}`);
  } catch (err) {
    const e = err as Error;
    if (err instanceof SshTrustError) out.problems.push(`hosts.${host.name}.ssh: ${e.message}`);
    else if (err instanceof SshConnectError) {
      out.problems.push(
        `hosts.${host.name}: ${e.message}. Fix: check ssh.host (${where}), that sshd runs there, and the network path (ProxyJump)`,
      );
    } else out.problems.push(`hosts.${host.name}: cannot run commands on ${where}: ${e.message}`);
    return false;
  }
  if (host instanceof SshHost) {
    const keys = host.link.lastKeys.map(
      (k) => `${k.host} ${k.keyType} ${k.fingerprint}${k.added ? ' (recorded on first use)' : ''}`,
    );
    out.checks.push(
      `host ${host.name} reachable over SSH: ${where}; host key${keys.length > 1 ? 's' : ''} verified: ${keys.join(', ')}`,
    );
  } else out.checks.push(`host ${host.name} reachable`);
  return true;
}

/** Every check against one host; never throws for a problem, only lists it. */
export async function runPreflight(host: Host, config: Config, runId: string): Promise<PreflightReport> {
  const out: PreflightReport = { host: host.name, checks: [], problems: [] };
  if (!(await checkReachable(host, out))) return out;

  const root = runDir(host.workdir, runId);
  try {
    await host.mkdirp(root);
    await host.writeFileAtomic(`${root}/.aerie-write-test`, 'ok\n');
    await host.remove(`${root}/.aerie-write-test`);
    out.checks.push(`run folder ${root} writable`);
  } catch (err) {
    out.problems.push(
      `hosts.${host.name}.workdir: cannot write ${root}: ${(err as Error).message}. Fix: choose a workdir the login user can write`,
    );
  }

  await checkLauncher(host, config.server.launcher, 'server.launcher', 'sglang.launch_server', root, out);
  out.sglang = await checkRelease(host, config, out);
  const e = config.stages.extract;
  if (e.driver === 'patched-server') await checkCapture(host, config, runId, out, out.sglang);
  await checkLauncher(host, config.stages.train.launcher, 'stages.train.launcher', null, `${root}/train`, out);
  const t = config.stages.train;
  if (t.driver === 'specforge' || t.driver === 'specforge-v0.2') {
    const detected = await detectSpecforge(host, config, `${root}/train`);
    const verdict = resolveRevision(t.driver, t['specforge-revision'], detected);
    out.checks.push(...verdict.checks);
    out.problems.push(...verdict.problems);
    if (verdict.profile) {
      out.specforge = { profile: verdict.profile, evidence: detected?.evidence ?? 'not probed' };
      await checkPrepareScript(host, config, root, verdict.profile, out);
    }
  }

  const model = config.target['model-path'];
  const modelConfig = await readJson(host, `${model}/config.json`);
  if (modelConfig === undefined)
    out.problems.push(
      `target.model-path: ${model}/config.json does not exist or is not JSON on ${host.name}. Fix: point target.model-path at the model directory on the host`,
    );
  else out.checks.push(`model ${model} present`);
  const input = config.stages.generate.input;
  if (!(await host.stat(input)))
    out.problems.push(
      `stages.generate.input: ${input} does not exist on ${host.name}. Fix: copy the prompts there or correct the path`,
    );

  const deploy = config.stages.deploy;
  const draftPath = deploy['draft-model-path']
    ? `${deploy['draft-model-path']}/config.json`
    : config.stages.train['draft-model-config'];
  const draftField = deploy['draft-model-path'] ? 'stages.deploy.draft-model-path' : 'stages.train.draft-model-config';
  const draft = await readJson(host, draftPath);
  if (draft === undefined) {
    out.problems.push(
      `${draftField}: cannot read ${draftPath} as JSON on ${host.name}. Fix: correct the path to the drafter's config.json`,
    );
  } else {
    const refusal = checkDrafterCompat(deploy['speculative-algorithm'], draft);
    if (refusal && (deploy as { 'allow-algorithm-mismatch'?: boolean })['allow-algorithm-mismatch']) {
      // An experiment the user asked for; the acceptance gate still measures it.
      out.checks.push(
        `drafter/algorithm mismatch allowed by stages.deploy.allow-algorithm-mismatch (experiments only): ${refusal}`,
      );
    } else if (refusal) out.problems.push(`stages.deploy.speculative-algorithm: ${refusal}`);
    else out.checks.push(`drafter config fits ${deploy['speculative-algorithm']}`);
  }

  const hiddenFromModel = (modelConfig as { hidden_size?: unknown } | undefined)?.hidden_size;
  const extract = config.stages.extract as { 'hidden-size'?: number };
  const hiddenSize = extract['hidden-size'] ?? (typeof hiddenFromModel === 'number' ? hiddenFromModel : undefined);
  await checkDisk(host, config, root, hiddenSize, out);

  const port = config.server.port;
  const holder = await portHolderOf(host, port);
  if (holder.listening) {
    // A resumed run's own server (still up from before) holds the port through a child of the
    // recorded wrapper: match by process group, not by pid.
    const ours = (await host.listLaunches()).find(
      (r) => holder.pgid !== undefined && r.pgid === holder.pgid && r.launchId.startsWith(`${runId}.`),
    );
    if (!ours) {
      const who = holder.pid
        ? `pid ${holder.pid}${holder.command ? ` (${holder.command})` : ''}`
        : 'a process aerie cannot see';
      out.problems.push(
        `server.port: ${port} on ${host.name} is held by ${who}; aerie will not stop it. Fix: stop that process yourself or set server.port to a free port`,
      );
    }
  } else out.checks.push(`port ${port} free`);

  const gpus = await host.gpuInventory();
  if (!gpus.available) out.checks.push(`GPU check skipped: ${gpus.reason}`);
  else {
    const verdict = judgeGpus(gpus, runGpus(config), `hosts.${config.target.host}.gpus`, host.name);
    out.checks.push(...verdict.checks);
    out.problems.push(...verdict.problems);
  }
  return out;
}

/**
 * Foreign GPU processes block the run only on the GPUs it will use (all, unless the host
 * lists its gpus). aerie never stops them (incident 4): it names them and their owner's GPU.
 */
export function judgeGpus(
  inv: GpuInventory,
  wanted: number[] | undefined,
  field: string,
  hostName: string,
): { checks: string[]; problems: string[] } {
  const checks: string[] = [];
  const problems: string[] = [];
  const present = new Set(inv.gpus.map((g) => g.index));
  const missing = (wanted ?? []).filter((i) => !present.has(i));
  if (missing.length > 0) {
    problems.push(
      `${field}: GPU ${missing.join(', ')} not on ${hostName}, which has ${inv.gpus.length ? inv.gpus.map((g) => g.index).join(', ') : 'none'}. Fix: list GPUs nvidia-smi shows there`,
    );
  }
  const used = wanted ? new Set(wanted) : present;
  const onOurs = (p: GpuProcess) => p.gpuIndex === null || used.has(p.gpuIndex);
  const where = (p: GpuProcess) =>
    `pid ${p.pid} (${p.usedMemoryMiB} MiB${p.gpuIndex === null ? '' : ` on GPU ${p.gpuIndex}`})`;
  const foreign = inv.processes.filter((p) => !p.ours);
  const blocking = foreign.filter(onOurs);
  const elsewhere = foreign.filter((p) => !onOurs(p));
  if (blocking.length > 0) {
    problems.push(
      `GPUs ${wanted ? `${[...used].join(', ')} ` : ''}on ${hostName} are in use by processes aerie did not start: ${blocking.map(where).join(', ')}. ` +
        `aerie never stops them (incident 4). Fix: ask their owner to stop them, wait until the GPUs are free` +
        (wanted ? `, or choose other GPUs in ${field}` : `, or list the free GPUs in ${field}`),
    );
  } else checks.push(wanted ? `GPUs ${wanted.join(', ')} free` : `${inv.gpus.length} GPUs free`);
  if (elsewhere.length > 0) checks.push(`other GPUs in use, left alone: ${elsewhere.map(where).join(', ')}`);
  return { checks, problems };
}

export function renderProblems(problems: readonly string[]): string {
  return `preflight found ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n${problems.map((p) => `  - ${p}`).join('\n')}`;
}

export function preflightActivities({ hosts }: ActivityDeps) {
  return {
    /** `specforge` (the revision the drivers follow) is the one preflight result later stages read. */
    async preflight({
      runId,
      config,
    }: RunRef): Promise<{ note: string; checks: string[]; specforge?: SpecforgeProfileId; sglang?: SglangRelease }> {
      const report = await runPreflight(hosts.get(config), config, runId);
      if (report.problems.length > 0)
        throw fatal('PreflightFailed', renderProblems(report.problems), { problems: report.problems });
      return {
        note: report.checks.join('; '),
        checks: report.checks,
        specforge: report.specforge?.profile,
        sglang: report.sglang,
      };
    },
  };
}
