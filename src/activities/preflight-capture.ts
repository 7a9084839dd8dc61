/**
 * Preflight for the patched-server extract driver: will aerie's capture run on this host and
 * write the dumps? An unpatched or unsupported server fails every sample only after the target
 * has loaded (conformance.md S1), so each condition is checked before anything launches:
 * the SGLang release the capture is written for, the interpreter that tokenizes, converts and
 * self-checks, the target's tokenizer and lm_head, the draft's layers, and the plugin's own
 * verdict on the launch line aerie will render.
 */
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { releaseNotes, renderServerArgv, type ServerLaunchSpec } from '../sglang/launch-argv.js';
import { launchRelease, type SglangRelease } from './server-launches.js';
import { AeriePyError } from '../stages/common/index.js';
import { captureLaunchFixes, CaptureSetupError, resolveCapture } from '../stages/extract/index.js';
import { baseServerSpec } from '../stages/launch-specs.js';
import { runDir } from '../shared.js';

/**
 * The host's SGLang release, resolved once for the run (server.sglang-version: the pin, or
 * read through the launcher's interpreter), and every server line rendered for it: a flag the
 * release renamed is noted, one it cannot take, a spec v2 request it cannot honour, or an
 * EAGLE-3 target it cannot capture aux states for is a problem now, not after the model loads.
 */
export async function checkRelease(host: Host, config: Config, out: CaptureReport): Promise<SglangRelease | undefined> {
  const d = config.stages.deploy;
  const release = await launchRelease(host, config, d['speculative-algorithm']);
  if ('problem' in release) {
    out.problems.push(release.problem);
    return undefined;
  }
  out.checks.push(
    `SGLang ${release.version} (${release.how}): every server launch is rendered for it, and each ready server must report it`,
  );
  const base = (role: 'generate' | 'deploy'): ServerLaunchSpec => ({
    ...baseServerSpec(config, role),
    sglangVersion: release.version,
  });
  const deploy: ServerLaunchSpec = {
    ...base('deploy'),
    specV2: d['spec-v2'],
    speculative: {
      algorithm: d['speculative-algorithm'],
      draftModelPath: d['draft-model-path'] ?? '<drafter>',
      numSteps: d['num-steps'],
      eagleTopk: d['eagle-topk'],
      numDraftTokens: d['num-draft-tokens'],
    },
  };
  if (deploy.speculative!.algorithm === 'NGRAM') delete deploy.speculative!.draftModelPath;
  for (const spec of [base('generate'), deploy]) {
    try {
      renderServerArgv(spec);
      for (const n of releaseNotes(spec, config.server.env)) if (!out.checks.includes(n)) out.checks.push(n);
    } catch (err) {
      const m = (err as Error).message;
      if (!out.problems.includes(m)) out.problems.push(m);
    }
  }
  return release;
}

export interface CaptureReport {
  checks: string[];
  problems: string[];
}

/** Modules the host-side steps import: tokens.py (transformers), selfcheck.py (numpy). */
const NEEDS = ['transformers', 'numpy'];

export async function checkCapture(
  host: Host,
  config: Config,
  runId: string,
  out: CaptureReport,
  release?: SglangRelease,
): Promise<void> {
  const e = config.stages.extract;
  if (e.driver === 'specforge-offline' || e.driver === 'transformers') return;
  const probe = `import importlib.util, sys\nmissing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\nprint(" ".join(missing))\nsys.exit(3 if missing else 0)`;
  const r = await host
    .exec([e.python, '-c', probe, ...NEEDS], { timeoutMs: 60_000 })
    .catch((err: Error) => ({ code: -1, stdout: '', stderr: err.message }));
  if (r.code !== 0) {
    out.problems.push(
      r.code === 3
        ? `stages.extract.python: ${e.python} on ${host.name} cannot import ${r.stdout.trim()} (aerie's tokens and self-check need ${NEEDS.join(' and ')}). Fix: point it at the target environment's interpreter (SGLang's has both)`
        : `stages.extract.python: cannot run ${e.python} on ${host.name} (${r.stderr.trim().slice(-200) || `exit ${r.code}`}). Fix: point it at the target environment's interpreter`,
    );
    return;
  }
  out.checks.push(`extract python ${e.python} imports ${NEEDS.join(', ')}`);

  const model = config.target['model-path'];
  const files = new Set((await host.list(model).catch(() => [])).map((f) => f.path.slice(f.path.lastIndexOf('/') + 1)));
  if (!files.has('tokenizer.json') && !files.has('tokenizer_config.json') && !files.has('tokenizer.model')) {
    out.problems.push(
      `target.model-path: ${model} on ${host.name} has no tokenizer files; aerie tokenizes with the target's own tokenizer and chat template. Fix: use the full model directory`,
    );
  }
  if (!files.has('model.safetensors') && !files.has('model.safetensors.index.json')) {
    out.problems.push(
      `target.model-path: ${model} on ${host.name} has neither model.safetensors nor model.safetensors.index.json; the self-check reads lm_head and the final norm from them. Fix: use a safetensors checkpoint`,
    );
  }

  let capture;
  try {
    capture = await resolveCapture(
      host,
      config,
      runId,
      `${runDir(host.workdir, runId)}/hidden_states`,
      e.driver === 'stock-server' ? 'stock-aux' : 'plugin',
      release,
    );
  } catch (err) {
    // An unreadable release is already reported by checkRelease.
    if (err instanceof CaptureSetupError || err instanceof AeriePyError)
      return void (out.problems.includes(err.message) || out.problems.push(err.message));
    throw err;
  }
  out.checks.push(...capture.notes);
  if (e.driver === 'stock-server')
    return void out.checks.push(
      "stock SGLang 0.5.23 returns the states over HTTP to aerie's client on the host: two launches (aux, final)",
    );
  const argv = renderServerArgv({ ...baseServerSpec(config, 'extract'), capture: capture.spec });
  try {
    const fixes = await captureLaunchFixes(
      host,
      capture.py,
      capture.spec.sglangVersion,
      argv.slice(config.server.launcher.length),
    );
    if (fixes.length > 0)
      out.problems.push(`server.extra-args: aerie's capture cannot run on the extraction launch: ${fixes.join('; ')}`);
    else
      out.checks.push(`the capture plugin accepts the extraction launch line (SGLang ${capture.spec.sglangVersion})`);
  } catch (err) {
    if (err instanceof CaptureSetupError || err instanceof AeriePyError) return void out.problems.push(err.message);
    throw err;
  }
}
