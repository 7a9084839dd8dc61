/**
 * `aerie plan <config>`: every command each stage would run, per host, with its environment —
 * rendered by the same functions the activities launch with, and nothing is run. Environment
 * values are shown as written in the config: a ${VAR} reference stays a reference (it is
 * expanded on the worker at launch time, and never printed).
 */
import { withRunGpus } from '../config/gpus.js';
import { loadConfigFile } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { shJoin } from '../hosts/index.js';
import { runDir, type StageName } from '../shared.js';
import {
  benchmarkReadyArgs,
  releaseNotes,
  renderServerArgv,
  serverLaunchEnv,
  type ServerLaunchSpec,
} from '../sglang/launch-argv.js';
import { eagle3TargetFloors, readinessEndpoint } from '../sglang/releases.js';
import { renderPrepareArgv, vocabMappingPath, runDumpDir } from '../stages/extract/index.js';
import {
  baseServerSpec,
  extractLayout,
  hiddenForTrain,
  prepareSpec,
  trainSpec,
  type StagePaths,
} from '../stages/launch-specs.js';
import {
  commandDrafterDir,
  renderCommandArgv,
  renderSpecforgeConfig,
  renderSpecforgeExportArgv,
  renderSpecforgeTrainArgv,
  renderTrainArgv,
} from '../stages/train/index.js';
import {
  profileBehaviours,
  profilesFor,
  SPECFORGE_PROFILES,
  type SpecforgeDriver,
  type SpecforgeRevisionPin,
} from '../stages/common/index.js';

export interface PlanStep {
  host: string;
  stage: StageName;
  step: string;
  argv?: string[];
  env?: Record<string, string>;
  /** Files aerie writes before the step (name → content). */
  files?: Record<string, string>;
  notes?: string[];
}

/** The run's paths as the activities compute them (activities/context.ts runPaths), for a run id placeholder. */
function planPaths(workdir: string, runId: string): StagePaths & { data: string } {
  const root = runDir(workdir.replace(/(.)\/+$/, '$1'), runId);
  return { root, logs: `${root}/logs`, data: `${root}/data`, hidden: `${root}/hidden_states`, train: `${root}/train` };
}

type Role = 'generate' | 'extract' | 'deploy' | 'baseline';

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
function serverStep(
  config: Config,
  role: Role,
  stage: StageName,
  drafterDir?: string,
  runId = '<run-id>',
  pass?: 'aux' | 'final',
): PlanStep {
  const release = planRelease(config);
  const spec: ServerLaunchSpec = { ...baseServerSpec(config, role), sglangVersion: release.version };
  const probe = readinessEndpoint(release.version, config.server.readiness.endpoint, config.server.env);
  const notes: string[] = [release.note, ...(probe.note ? [probe.note] : [])];
  if (role === 'deploy') {
    const d = config.stages.deploy;
    spec.speculative = {
      algorithm: d['speculative-algorithm'],
      draftModelPath: drafterDir,
      numSteps: d['num-steps'],
      eagleTopk: d['eagle-topk'],
      numDraftTokens: d['num-draft-tokens'],
    };
    spec.maxRunningRequests = d['max-running-requests'];
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
  return {
    host: config.target.host,
    stage,
    step: `launch ${role} server${pass ? ` (${pass} pass)` : ''}`,
    argv: renderServerArgv(spec),
    env,
    notes,
  };
}

export function planRun(config: Config, runId = '<run-id>'): PlanStep[] {
  const host = config.target.host;
  const workdir = config.hosts[host]!.workdir;
  const p = planPaths(workdir, runId);
  const g = config.stages.generate;
  const steps: PlanStep[] = [];
  const dataPath = `${p.data}/train.jsonl`;

  steps.push(serverStep(config, 'generate', 'generate'));
  steps.push({
    host,
    stage: 'generate',
    step: 'regenerate assistant turns',
    notes: [
      `POST /v1/chat/completions for every assistant turn of ${g.input}${g['num-samples'] ? ` (first ${g['num-samples']} samples)` : ''}: ` +
        `temperature ${g.temperature}, max_tokens ${g['max-tokens']}, ${g.concurrency} requests in flight, ${g['request-retries']} retries`,
      `writes ${p.data}/{train,train_error,train_skipped,train_rejected}.jsonl and manifest.json; resumable by sample id`,
    ],
  });

  const e = config.stages.extract;
  const layout = extractLayout(config);
  if (e.driver !== 'specforge-offline') {
    steps.push({
      host,
      stage: 'extract',
      step: 'tokenize as SpecForge does, then check free space',
      argv: [
        e.python,
        '-m',
        'aerie_hs.tokens',
        '--model',
        config.target['model-path'],
        '--chat-template',
        e['chat-template'],
        '--max-length',
        String(e['max-length']),
        '--cross-check',
        e['cross-check'],
        // The tokenizer loads as the server loads the model (stages/extract/tokens.ts reads the same flag).
        ...(config.server['extra-args'].includes('--trust-remote-code') ? ['--trust-remote-code'] : []),
      ],
      notes: [
        `stdin ${dataPath}, stdout ${p.hidden}/ids.jsonl ({id, input_ids, loss_mask}); run in aerie's staged package; SpecForge's own preprocess_conversations cross-checks where importable (${e['cross-check']})`,
        `refuse unless ${p.hidden} can hold Σ tokens × (8 × hidden_size + 16) bytes`,
      ],
    });
  }
  if (e.driver === 'stock-server') {
    const dump = e['dump-dir'] ? runDumpDir(e['dump-dir'], runId) : `${p.hidden}/.stock`;
    steps.push(serverStep(config, 'extract', 'extract', undefined, runId, 'aux'));
    steps.push({
      host,
      stage: 'extract',
      step: "aux pass: aerie's client on the host",
      argv: [
        e.python,
        '-m',
        'aerie_hs.stock_client',
        '--host',
        config.server['listen-host'],
        '--port',
        String(config.server.port),
        '--ids',
        '<batch>',
        '--dumps',
        dump,
        '--pass',
        'aux',
        '--concurrency',
        String(e.concurrency),
      ],
      notes: [
        `POST /generate {input_ids, rid, return_hidden_states: true, max_new_tokens 1} from the host itself: every response carries T × 3H floats as JSON (~10× their bf16 size), so it never crosses the SSH link`,
        `cost: a second launch of the target, and ${dump} holds 6 × hidden bytes a token of every sample until the final pass (on the output disk by default); for small targets and tests — large ones want patched-server`,
      ],
    });
    steps.push(serverStep(config, 'extract', 'extract', undefined, runId, 'final'));
    steps.push({
      host,
      stage: 'extract',
      step: 'final pass, conversion and self-check',
      argv: [
        e.python,
        '-m',
        'aerie_hs.stock_client',
        '--host',
        config.server['listen-host'],
        '--port',
        String(config.server.port),
        '--ids',
        '<batch>',
        '--dumps',
        dump,
        '--pass',
        'final',
        '--greedy',
        '<batch greedy>',
      ],
      notes: [
        `each sample's final rows merged with its aux part into <id>.safetensors, then python -m aerie_hs.ckpt convert --remove-dumps → ${p.hidden}/rows_<g>-<g+${e['file-group-size']}>/data_<i>.ckpt`,
        `self-check as for patched-server: the first ${e['self-check'].samples} samples, then ${e['self-check']['final-samples']} spread over the run`,
      ],
    });
  }
  if (e.driver === 'patched-server') {
    steps.push(serverStep(config, 'extract', 'extract', undefined, runId));
    steps.push({
      host,
      stage: 'extract',
      step: 'prefill every sample',
      notes: [
        `POST /generate {input_ids, rid: <sample id>, max_new_tokens 1, temperature 0} with ${e.concurrency} in flight; meta_info.prompt_tokens must equal the ids sent; ` +
          `the capture writes ${runDumpDir(e['dump-dir'], runId)}/<id>.safetensors (aux [T,3H] + final [T,H], bf16) on the host`,
        `batches of dumps → python -m aerie_hs.ckpt convert --remove-dumps → ${p.hidden}/rows_<g>-<g+${e['file-group-size']}>/data_<i>.ckpt (SpecForge's offline layout; index.jsonl maps i to the sample id); no state crosses the link`,
        `self-check (python -m aerie_hs.selfcheck with ${e.python}): the first ${e['self-check'].samples} samples before the rest, ${e['self-check']['final-samples']} spread over the run before the stage counts; ` +
          `lm_head over the final states must predict the assistant tokens at ≥ ${e['self-check']['min-agreement']} and the server's greedy token`,
      ],
    });
  }
  if (e.driver === 'specforge-offline') {
    steps.push({
      host,
      stage: 'extract',
      step: 'check free space',
      notes: [`refuse unless ${p.hidden} can hold ~tokens × 8 × hidden_size bytes`],
    });
    const launch = prepareSpec(config, dataPath, p.hidden, pinnedProfile(config));
    steps.push({
      host,
      stage: 'extract',
      step: 'prepare_hidden_states (detached)',
      argv: renderPrepareArgv(launch),
      env: withRunGpus(config, e.env),
      notes: [
        `log ${p.logs}/extract-<n>.log; every data_{i}.ckpt checked with ${e.python} (zip directory, tensor sizes); bad files deleted and redone`,
      ],
    });
  }

  // The CLI's prepare step writes the vocab mapping beside the features (from ca949555); the
  // v0.2 scripts' does not, nor does aerie's converter (SpecForge then builds it at the start of
  // training), and the activity passes on only a mapping that is really there.
  const t0 = config.stages.train;
  const mapping =
    e.driver === 'specforge-offline' && t0.driver === 'specforge' ? { vocabMapping: vocabMappingPath(p.hidden) } : {};
  const hidden = hiddenForTrain(config, { dir: p.hidden, layout, ...mapping });
  const spec = trainSpec(config, p, dataPath, hidden, pinnedProfile(config));
  const t = config.stages.train;
  let drafterDir: string;
  if (spec.driver === 'specforge-v0.2') {
    steps.push({
      host,
      stage: 'train',
      step: 'train_eagle3.py (detached)',
      argv: renderTrainArgv(spec.launch),
      env: withRunGpus(config, t.env),
      notes: trainNotes(config, layout, hidden !== undefined),
    });
    drafterDir = `${spec.launch.outputDir}/epoch_<e>_step_<s>`;
  } else if (spec.driver === 'specforge') {
    steps.push({
      host,
      stage: 'train',
      step: 'specforge train (detached)',
      argv: renderSpecforgeTrainArgv(spec.run),
      env: withRunGpus(config, t.env),
      files: { [spec.run.configPath]: renderSpecforgeConfig(spec.run) },
      notes: [
        ...trainNotes(config, layout, hidden !== undefined),
        `after a crash: + training.resume_from=${spec.run.outputDir}/${spec.run.runId}-step<N> (newest complete)`,
      ],
    });
    steps.push({
      host,
      stage: 'train',
      step: 'specforge export (detached)',
      argv: renderSpecforgeExportArgv(spec.run, `${spec.run.outputDir}/${spec.run.runId}-step<N>`, spec.drafterDir),
      env: withRunGpus(config, t.env),
      notes: spec.run.vocabMappingPath
        ? [`--vocab-mapping ${spec.run.vocabMappingPath}: passed when the prepare step wrote it`]
        : undefined,
    });
    drafterDir = spec.drafterDir;
  } else {
    steps.push({
      host,
      stage: 'train',
      step: 'trainer command (detached)',
      argv: renderCommandArgv(spec.template, spec.values),
      env: withRunGpus(config, t.env),
      notes: trainNotes(config, layout, hidden !== undefined),
    });
    drafterDir = commandDrafterDir(spec.template, spec.values);
  }

  const deployDrafter = config.stages.deploy['draft-model-path'] ?? drafterDir;
  steps.push({ ...serverStep(config, 'deploy', 'deploy', deployDrafter) });
  steps.push({
    host,
    stage: 'deploy',
    step: 'acceptance gate',
    notes: [
      `${config.stages.deploy['acceptance-requests']} greedy requests; refuse below accept length ${config.stages.deploy['acceptance-threshold']}`,
    ],
  });
  steps.push({
    host,
    stage: 'benchmark',
    step: 'sweep',
    notes: [
      `concurrency ${config.stages.benchmark.concurrencies.join(', ')} against the drafter${config.stages.benchmark.baseline ? ', then the target alone' : ''}`,
    ],
  });
  if (config.stages.benchmark.baseline) steps.push(serverStep(config, 'baseline', 'benchmark'));
  return steps;
}

/** Which SpecForge revision the plan is for, and what follows from it; the pin, or what preflight will read. */
export function revisionNotes(driver: SpecforgeDriver, pin: SpecforgeRevisionPin): string[] {
  const ids = profilesFor(driver);
  if (pin !== 'auto')
    return [`SpecForge revision ${pin} (pinned): ${SPECFORGE_PROFILES[pin].label}`, ...profileBehaviours(pin)];
  if (ids.length === 1)
    return [
      `SpecForge revision: detected at preflight (auto); driver ${driver} drives ${ids[0]}: ${SPECFORGE_PROFILES[ids[0]!].label}`,
      ...profileBehaviours(ids[0]!),
    ];
  return [
    `SpecForge revision: detected at preflight (auto) from the launcher's train_eagle3.py: ${ids.join(', ')}; \`aerie doctor\` shows the host's`,
    ...ids.map((id) => `${id}: ${profileBehaviours(id).slice(0, 2).join('; ')}`),
  ];
}

function trainNotes(config: Config, layout: string, offline: boolean): string[] {
  const t = config.stages.train;
  const revision = t.driver === 'command' ? [] : revisionNotes(t.driver, t['specforge-revision']);
  return [...revision, ...dataNotes(layout, offline)];
}

function dataNotes(layout: string, offline: boolean): string[] {
  if (offline) return [`offline: reads the extract stage's ${layout} hidden states`];
  return ['online: the trainer runs the target itself'];
}

export function renderPlan(config: Config, steps: PlanStep[], source: string): string {
  const out = [`aerie plan ${source} — nothing is run; \${VAR} in env is expanded on the worker at launch`, ''];
  const hosts = [...new Set(steps.map((s) => s.host))];
  for (const h of hosts) {
    const hc = config.hosts[h]! as Record<string, unknown>;
    const ssh = (hc.ssh ?? {}) as { host?: string; user?: string; port?: number; 'proxy-jump'?: string };
    const target = `${ssh.user ? `${ssh.user}@` : ''}${ssh.host ?? '?'}${ssh.port ? `:${ssh.port}` : ''}${ssh['proxy-jump'] ? ` via ${ssh['proxy-jump']}` : ''}`;
    const how =
      hc.kind === 'ssh'
        ? `ssh ${target}${hc['exec-prefix'] ? `, every command through: ${shJoin(hc['exec-prefix'] as string[])}` : ''}`
        : 'this machine';
    const http =
      typeof hc['http-address'] === 'string' && hc['http-address'] !== '127.0.0.1'
        ? `, HTTP forwarded to ${hc['http-address']}`
        : '';
    const gpus = Array.isArray(hc.gpus) ? `, GPUs ${(hc.gpus as number[]).join(',')} only` : '';
    out.push(`host ${h} (${how}${http}), workdir ${String(hc.workdir)}${gpus}`);
    for (const s of steps.filter((x) => x.host === h)) {
      out.push('', `  ${s.stage} · ${s.step}`);
      for (const [path, content] of Object.entries(s.files ?? {})) {
        out.push(
          `    writes ${path}:`,
          ...content
            .trimEnd()
            .split('\n')
            .map((l) => `      ${l}`),
        );
      }
      if (s.env && Object.keys(s.env).length)
        out.push(
          `    env  ${Object.entries(s.env)
            .map(([k, v]) => `${k}=${v}`)
            .join(' ')}`,
        );
      if (s.argv) out.push(`    argv ${shJoin(s.argv)}`);
      for (const n of s.notes ?? []) out.push(`    ${n}`);
    }
  }
  return out.join('\n') + '\n';
}

export async function planCommand(path: string, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const config = await loadConfigFile(path);
  out.write(renderPlan(config, planRun(config), path));
  return 0;
}

/** The revision the config pins, if any: `auto` is decided at preflight, so the plan shows each driver's default. */
function pinnedProfile(config: Config) {
  const t = config.stages.train;
  const pin = t.driver === 'command' ? 'auto' : t['specforge-revision'];
  return pin === 'auto' ? undefined : SPECFORGE_PROFILES[pin];
}
