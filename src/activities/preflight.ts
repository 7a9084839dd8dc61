/**
 * Preflight: everything that can be known to be wrong before a model spends ten minutes
 * loading — the host reachable with a verified key, the interpreters (incident 1), the
 * port, foreign GPU users (incident 4), the paths, the disk, the drafter against the
 * algorithm (incident 3). All problems are reported at once, each saying what to change.
 * `aerie doctor` runs the same checks without Temporal.
 */
import { runGpus } from '../config/gpus.js';
import type { Config } from '../config/schema.js';
import { portHolderOf } from './server-watch.js';
import type { GpuInventory, GpuProcess, Host } from '../hosts/host.js';
import { SshConnectError, SshTrustError, SshHost } from '../hosts/index.js';
import { checkDrafterCompat } from '../sglang/drafter-check.js';
import { estimatedBytesPerToken, moduleLaunch } from '../stages/extract/index.js';
import {
  formatBytes,
  CLI_PROBE,
  detectFromCli,
  detectFromScript,
  parseCliProbe,
  parseRevParse,
  prepareAuxFlagIn,
  resolveRevision,
  type Detection,
  SPECFORGE_PROFILES,
  type SpecforgeProfileId,
} from '../stages/common/index.js';
import { runDir } from '../shared.js';
import { checkCapture, checkRelease } from './preflight-capture.js';
import type { SglangRelease } from './server-launches.js';
import { fatal, type ActivityDeps, type RunRef } from './context.js';

export interface PreflightReport {
  host: string;
  checks: string[];
  problems: string[];
  /** The SpecForge revision the train and extract drivers follow (SpecForge drivers only). */
  specforge?: { profile: SpecforgeProfileId; evidence: string };
  sglang?: SglangRelease; // resolved once for the run; launchServer renders for it
}

export { moduleLaunch };

/** The Python script a launcher runs (`torchrun ... train.py`, `python train.py`), if any. */
export function launcherScript(launcher: readonly string[]): string | null {
  if (moduleLaunch(launcher)) return null;
  // Template placeholders ({output_dir}/...) are filled in at launch; only literal paths are checked.
  return launcher.slice(1).find((a) => /\.py$/.test(a) && !a.startsWith('-') && !a.includes('{')) ?? null;
}

export interface DiskEstimate {
  tokens: number;
  /** Hidden states kept for training: tokens × 8 × hidden bytes. */
  hiddenBytes: number;
  /** The generated data set, about the size of the input. */
  dataBytes: number;
  /** What the dump dir holds at once: one longest sample per in-flight request. */
  dumpBytes: number;
}

/**
 * The disk a run needs, from the generate input: about 4 bytes of JSONL per token, only the
 * samples the run takes, and never more than max-length tokens per sample.
 */
export function estimateDisk(a: {
  inputBytes: number;
  inputLines: number;
  numSamples?: number;
  maxLength: number;
  hiddenSize: number;
  extractConcurrency: number;
}): DiskEstimate {
  const lines = Math.max(1, a.inputLines);
  const samples = Math.min(lines, a.numSamples ?? lines);
  const tokens = Math.min(Math.ceil((a.inputBytes * samples) / lines / 4), samples * a.maxLength);
  return {
    tokens,
    hiddenBytes: tokens * estimatedBytesPerToken(a.hiddenSize),
    dataBytes: Math.ceil((a.inputBytes * samples) / lines),
    dumpBytes: a.extractConcurrency * a.maxLength * estimatedBytesPerToken(a.hiddenSize),
  };
}

async function run(host: Host, argv: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return host.exec(argv, { timeoutMs: 60_000 }).catch((e: Error) => ({ code: -1, stdout: '', stderr: e.message }));
}

/** The absolute path a program name resolves to on the host, or null. */
async function which(host: Host, program: string): Promise<string | null> {
  const r = await run(host, ['sh', '-c', 'command -v -- "$1"', 'sh', program]);
  return r.code === 0 && r.stdout.trim() ? r.stdout.trim() : null;
}

async function canImport(host: Host, interpreter: string, module: string): Promise<boolean> {
  const probe = 'import importlib.util, sys\nsys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)';
  return (await run(host, [interpreter, '-c', probe, module])).code === 0;
}

/** The interpreter on a launcher script's `#!` line (torchrun, accelerate, ...), when it is a Python. */
async function shebangPython(host: Host, path: string): Promise<string | null> {
  const r = await run(host, ['head', '-n', '1', '--', path]);
  const m = /^#!\s*(\S+)(?:\s+(\S+))?/.exec(r.stdout);
  if (!m) return null;
  const interp = m[1]!.endsWith('/env') ? m[2] : m[1];
  return interp && /python/.test(interp) ? interp : null;
}

async function checkLauncher(
  host: Host,
  launcher: readonly string[],
  field: string,
  expectModule: string | null,
  cwd: string,
  out: PreflightReport,
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

async function readJson(host: Host, path: string): Promise<unknown | undefined> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Free bytes where path is or will be (the nearest existing ancestor). */
async function freeAt(host: Host, path: string): Promise<{ at: string; free: number } | null> {
  for (let p = path; p.length > 0; p = p.slice(0, Math.max(p.lastIndexOf('/'), 0))) {
    const at = p || '/';
    if (await host.stat(at)) return { at, free: await host.freeBytes(at) };
    if (at === '/') break;
  }
  return null;
}

async function checkDisk(
  host: Host,
  config: Config,
  root: string,
  hiddenSize: number | undefined,
  out: PreflightReport,
): Promise<void> {
  const gen = config.stages.generate;
  const maxLength =
    (config.stages.extract as { 'max-length'?: number })['max-length'] ??
    (config.stages.train as { 'max-length'?: number })['max-length'] ??
    2048;
  const input = await host.stat(gen.input);
  if (!input || hiddenSize === undefined) return;
  const wc = await run(host, ['wc', '-l', '--', gen.input]);
  const lines = Number(/^\s*(\d+)/.exec(wc.stdout)?.[1] ?? 1);
  const extract = config.stages.extract as { concurrency?: number; 'dump-dir'?: string };
  const est = estimateDisk({
    inputBytes: input.size,
    inputLines: lines,
    numSamples: gen['num-samples'],
    maxLength,
    hiddenSize,
    extractConcurrency: extract.concurrency ?? 1,
  });
  const work = await freeAt(host, root);
  const need = est.hiddenBytes + est.dataBytes;
  if (work && work.free < need) {
    out.problems.push(
      `disk: the run needs about ${formatBytes(need)} in ${root} on ${host.name} (hidden states ≈ ${est.tokens} tokens × 8 × hidden ${hiddenSize} = ${formatBytes(est.hiddenBytes)}, plus the data), ` +
        `but ${work.at} has ${formatBytes(work.free)} free. Fix: free space, or point hosts.${host.name}.workdir at a larger disk`,
    );
  } else if (work)
    out.checks.push(`disk: ${formatBytes(work.free)} free in ${work.at}, about ${formatBytes(need)} needed`);
  const dumpDir = extract['dump-dir'];
  if (dumpDir) {
    const dump = await freeAt(host, dumpDir);
    if (dump && dump.free < est.dumpBytes) {
      out.problems.push(
        `stages.extract.dump-dir: ${dumpDir} on ${host.name} needs room for ${extract.concurrency ?? 1} in-flight dumps of up to ${maxLength} tokens ` +
          `(${formatBytes(est.dumpBytes)}), but ${dump.at} has ${formatBytes(dump.free)} free. Fix: lower stages.extract.concurrency or use a larger RAM disk`,
      );
    } else if (dump) out.checks.push(`dump dir: ${formatBytes(dump.free)} free in ${dump.at}`);
  }
}

/** `git rev-parse HEAD` of the checkout a file is in, when it is one. */
async function checkoutCommit(host: Host, dir: string): Promise<string | undefined> {
  const r = await run(host, ['git', '-C', dir, 'rev-parse', 'HEAD']);
  return parseRevParse(r.code, r.stdout);
}

const dirOf = (p: string) => p.slice(0, Math.max(p.lastIndexOf('/'), 1));
const absolute = (p: string, cwd: string) => (p.startsWith('/') ? p : `${cwd}/${p}`);

/**
 * What SpecForge the train launcher reaches: the CLI through its interpreter (a `python -m`
 * launcher, or the `#!` of a `specforge` console script), the v0.2 scripts by reading the
 * train_eagle3.py it names. Undefined when there is nothing to probe (a non-Python launcher).
 */
async function detectSpecforge(host: Host, config: Config, cwd: string): Promise<Detection | undefined> {
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
  const r = await run(host, [python, '-c', CLI_PROBE]);
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
async function checkPrepareScript(
  host: Host,
  config: Config,
  cwd: string,
  profile: SpecforgeProfileId,
  out: PreflightReport,
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
