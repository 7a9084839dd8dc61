/** The server launches of the plan: one per role, rendered as activities/server.ts renders them. */
import { withRunGpus } from '../../config/gpus.js';
import type { Config } from '../../config/schema.js';
import type { StageName } from '../../shared.js';
import {
  benchmarkReadyArgs,
  releaseNotes,
  renderServerArgv,
  serverLaunchEnv,
  type ServerLaunchSpec,
} from '../../sglang/launch-argv.js';
import { eagle3TargetFloors, readinessEndpoint } from '../../sglang/releases.js';
import { runDumpDir } from '../../stages/extract/index.js';
import { baseServerSpec } from '../../stages/launch-specs.js';
import type { PlanStep } from './step.js';
import { engineOf, renderVllmArgv, vllmBenchmarkArgs, vllmLaunchEnv } from '../../engines/index.js';

export type Role = 'generate' | 'extract' | 'deploy' | 'baseline';

/** The release every launch is shown for: the pin, else 0.5.23 (preflight reads the host's). */
export function planRelease(config: Config): { version: string; note: string } {
  const pin = config.server['sglang-version'];
  if (pin !== 'auto')
    return { version: pin, note: `for SGLang ${pin} (server.sglang-version); the ready server must report it` };
  return {
    version: '0.5.23',
    note: "for SGLang 0.5.23 (shown; server.sglang-version auto: preflight reads the host's release and every launch follows it)",
  };
}

/** The server launch for a role, as activities/server.ts builds it. */
export function serverStep(
  config: Config,
  role: Role,
  stage: StageName,
  drafterDir?: string,
  runId = '<run-id>',
  pass?: 'aux' | 'final',
): PlanStep {
  if (engineOf(config) === 'vllm') return vllmServerStep(config, role, stage, drafterDir);
  const release = planRelease(config);
  const spec: ServerLaunchSpec = { ...baseServerSpec(config, role), sglangVersion: release.version };
  const probe = readinessEndpoint(release.version, config.server.readiness.endpoint, config.server.env);
  const notes: string[] = [release.note, ...(probe.note ? [probe.note] : [])];
  if (role === 'deploy') {
    const d = config.stages.deploy;
    Object.assign(spec, deployLaunch(config, drafterDir));
    spec.specV2 = d['spec-v2'];
    const ready = benchmarkReadyArgs(spec, Math.max(...config.stages.benchmark.concurrencies));
    Object.assign(spec, ready.spec);
    notes.push(...ready.notes);
    const floors = eagle3TargetFloors(release.version, d['speculative-algorithm']);
    if (floors.length > 0)
      notes.push(
        `refused at preflight for a ${floors.join(' or ')} target (its config.json architectures): ${d['speculative-algorithm']} needs a later SGLang for it`,
      );
  }
  const e = config.stages.extract;
  let env: Record<string, string>;
  try {
    notes.push(...releaseNotes(spec, config.server.env));
    env = serverLaunchEnv(withRunGpus(config, config.server.env), undefined, spec);
  } catch (err) {
    // Shown, not thrown: the rest of the plan is still worth reading; preflight and the launch refuse it.
    notes.push(`REFUSED at launch: ${(err as Error).message}`);
    env = serverLaunchEnv(withRunGpus(config, config.server.env));
  }
  if (role === 'extract' && e.driver === 'patched-server') {
    // What the launch resolves on the host (the release, the draft's layers, the staged package) shows as placeholders.
    const pin = config.server['sglang-version'];
    spec.capture = { sglangVersion: release.version, draftLayerIds: [1, 2, 3] };
    env = serverLaunchEnv(withRunGpus(config, config.server.env), {
      pythonPath: `${config.hosts[config.target.host]!.workdir}/aerie-py/<version>`,
      dumpDir: runDumpDir(e['dump-dir'], runId),
      draftLayerIds: [1, 2, 3],
    });
    notes.push(
      `aerie's capture (py/aerie_hs, an SGLang plugin) is staged on the host and put on PYTHONPATH; ${pin === 'auto' ? "SGLang's release is read through the launcher's interpreter (0.5.23 shown)" : `SGLang ${pin} (server.sglang-version)`}`,
      "the draft config's eagle_aux_hidden_state_layer_ids replace [1, 2, 3] (shown); the plugin's own check (python -m aerie_hs.sglang_hook check) judges this line before launch",
    );
  }
  if (role === 'extract' && e.driver === 'stock-server') {
    // Stock capture exists only on 0.5.23; preflight refuses another release for it.
    spec.sglangVersion = '0.5.23';
    spec.capture = {
      sglangVersion: '0.5.23',
      draftLayerIds: [1, 2, 3],
      mode: pass === 'final' ? 'stock-final' : 'stock-aux',
    };
    notes.push(
      pass === 'final'
        ? 'stock SGLang 0.5.23, final pass: returns the post-norm state of every prompt token'
        : "stock SGLang 0.5.23, aux pass: returns the draft's three aux layers (the draft config's ids replace [1, 2, 3]); no draft is loaded",
    );
  }
  let argv: string[] | undefined;
  try {
    argv = renderServerArgv(spec);
  } catch (err) {
    // The same: a launch this release refuses has no command line to show, only the reason.
    const refused = `REFUSED at launch: ${(err as Error).message}`;
    if (!notes.includes(refused)) notes.push(refused);
  }
  return {
    host: config.target.host,
    stage,
    step: `launch ${role} server${pass ? ` (${pass} pass)` : ''}`,
    argv,
    env,
    notes,
  };
}

/** The same launch for a vLLM target: one release read (0.32.0), judged by vLLM's parser in the tests. */
function vllmServerStep(config: Config, role: Role, stage: StageName, drafterDir?: string): PlanStep {
  const spec: ServerLaunchSpec = baseServerSpec(config, role);
  const notes: string[] = [
    "vLLM's OpenAI server (server.engine vllm; lines as vLLM 0.32.0's parser takes them); ready when /health answers 200 after the log's \"Application startup complete\", then a greedy /v1/completions smoke request",
  ];
  if (role === 'deploy') {
    const d = config.stages.deploy;
    Object.assign(spec, deployLaunch(config, drafterDir));
    const ready = vllmBenchmarkArgs(spec, Math.max(...config.stages.benchmark.concurrencies));
    Object.assign(spec, ready.spec);
    notes.push(
      ...ready.notes,
      "the drafter is checked against vLLM's loader first (d2t against the draft vocab, three distinct auxiliary layers inside the target); the acceptance gate reads vLLM's spec-decode counters (/metrics) around each request",
    );
  }
  let argv: string[] | undefined;
  try {
    argv = renderVllmArgv(spec);
  } catch (err) {
    notes.push(`REFUSED at launch: ${(err as Error).message}`);
  }
  return {
    host: config.target.host,
    stage,
    step: `launch ${role} server`,
    argv,
    env: vllmLaunchEnv(withRunGpus(config, config.server.env)),
    notes,
  };
}

/** The deploy launch's speculative settings, as activities/server-start.ts sets them. */
function deployLaunch(
  config: Config,
  drafterDir?: string,
): Pick<ServerLaunchSpec, 'speculative' | 'maxRunningRequests'> {
  const d = config.stages.deploy;
  return {
    speculative: {
      algorithm: d['speculative-algorithm'],
      draftModelPath: drafterDir,
      numSteps: d['num-steps'],
      eagleTopk: d['eagle-topk'],
      numDraftTokens: d['num-draft-tokens'],
    },
    maxRunningRequests: d['max-running-requests'],
  };
}
