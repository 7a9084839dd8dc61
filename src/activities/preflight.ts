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
import type { GpuInventory, GpuProcess, Host } from '../hosts/host.js';
import { checkDrafterCompat } from '../sglang/drafter-check.js';
import { engineOf, vllmLoaderProblems } from '../engines/index.js';
import { moduleLaunch } from '../stages/extract/index.js';
import { resolveRevision, type SpecforgeProfileId } from '../stages/common/index.js';
import { runDir } from '../shared.js';
import { checkCapture, checkRelease } from './preflight-capture.js';
import { checkDisk } from './preflight-disk.js';
import { checkHfExtract } from './preflight-hf.js';
import { checkPort, checkReachable, judgeGpus } from './preflight-host.js';
import { checkPoolServers } from './preflight-pool.js';
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
export { judgeGpus };

async function readJson(host: Host, path: string): Promise<unknown | undefined> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Every check against one host; never throws for a problem, only lists it. */
export async function runPreflight(
  host: Host,
  config: Config,
  runId: string,
  /** The pool's other hosts (stages.generate.servers), checked too when given. */
  hostFor?: (config: Config, name: string) => Host,
): Promise<PreflightReport> {
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

  const vllm = engineOf(config) === 'vllm';
  await checkLauncher(
    host,
    config.server.launcher,
    'server.launcher',
    vllm ? 'vllm.entrypoints.openai.api_server' : 'sglang.launch_server',
    root,
    out,
  );
  // vLLM's release is read from the ready server (/version); SGLang's decides every launch line.
  if (!vllm) out.sglang = await checkRelease(host, config, out);
  const e = config.stages.extract;
  if (e.driver === 'patched-server') await checkCapture(host, config, runId, out, out.sglang);
  if (e.driver === 'transformers') await checkHfExtract(host, config, out);
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
    if (vllm) {
      // vLLM's loader rules that the draft config alone decides (the tensors are checked again at deploy).
      const loader = vllmLoaderProblems({ draftConfig: draft, targetConfig: modelConfig });
      for (const p of loader) out.problems.push(`${draftField}: ${p}`);
      if (loader.length === 0)
        out.checks.push(`drafter config fits vLLM's EAGLE-3 loader (auxiliary layers, hidden size)`);
    }
  }

  const hiddenFromModel = (modelConfig as { hidden_size?: unknown } | undefined)?.hidden_size;
  const extract = config.stages.extract as { 'hidden-size'?: number };
  const hiddenSize = extract['hidden-size'] ?? (typeof hiddenFromModel === 'number' ? hiddenFromModel : undefined);
  await checkDisk(host, config, root, hiddenSize, out);

  await checkPort(host, config.server.port, 'server.port', runId, out);

  const gpus = await host.gpuInventory();
  if (!gpus.available) out.checks.push(`GPU check skipped: ${gpus.reason}`);
  else {
    const verdict = judgeGpus(gpus, runGpus(config), `hosts.${config.target.host}.gpus`, host.name);
    out.checks.push(...verdict.checks);
    out.problems.push(...verdict.problems);
  }
  if (hostFor) {
    const pool = await checkPoolServers(hostFor, config, runId, out.sglang);
    out.checks.push(...pool.checks);
    out.problems.push(...pool.problems);
  }
  return out;
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
      const report = await runPreflight(hosts.get(config), config, runId, (c, name) => hosts.get(c, name));
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
