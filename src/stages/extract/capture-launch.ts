/**
 * What an extraction launch with aerie's capture needs to know about the host before it
 * starts: which SGLang release the server runs (the capture is written per release), which
 * layers the draft wants, and where the run's dumps go. Shared by the server launch, the
 * extract activity, preflight and `aerie plan`, so all four say the same thing.
 */
import type { Config } from '../../config/schema.js';
import type { Host } from '../../hosts/host.js';
import {
  CAPTURE_SGLANG_VERSIONS,
  type CaptureEnv,
  type CaptureMode,
  type CaptureSpec,
} from '../../sglang/launch-argv.js';
import { runAeriePy, shipAeriePy, type AeriePy } from '../common/index.js';

/** The run's own dump folder under stages.extract.dump-dir: nothing else writes there. */
export const runDumpDir = (dumpDir: string, runId: string): string => `${dumpDir.replace(/\/+$/, '')}/${runId}`;

/** The run's dump folder for either capture driver: the stock one waits on the output disk by default. */
export function extractDumpDir(config: Config, runId: string, hiddenDir: string): string {
  const e = config.stages.extract;
  if (e.driver === 'patched-server') return runDumpDir(e['dump-dir'], runId);
  if (e.driver === 'stock-server') return e['dump-dir'] ? runDumpDir(e['dump-dir'], runId) : `${hiddenDir}/.stock`;
  throw new Error(`extractDumpDir: the ${e.driver} driver has no dump folder`);
}

/** `[python, ..., -m, module, ...]` → the interpreter and module, else null. */
export function moduleLaunch(launcher: readonly string[]): { interpreter: string; module: string } | null {
  const i = launcher.indexOf('-m');
  if (i < 1 || i + 1 >= launcher.length) return null;
  return { interpreter: launcher[0]!, module: launcher[i + 1]! };
}

export interface SglangVersion {
  version?: string;
  /** How it was found, for checks and notes. */
  how: string;
  /** Why it could not be found or cannot be captured from, with the fix. */
  problem?: string;
}

/**
 * The host's SGLang release, which every launch is rendered for (src/sglang/releases.ts): the
 * pin, else the installed distribution's version through the launcher's interpreter
 * (`importlib.metadata`, which imports nothing of SGLang itself, so it is quick even where
 * importing sglang pulls in torch).
 */
export async function resolveSglangVersion(
  host: Host,
  launcher: readonly string[],
  pin: string,
): Promise<SglangVersion> {
  if (pin !== 'auto') return { version: pin, how: 'server.sglang-version' };
  const m = moduleLaunch(launcher);
  if (!m || m.module !== 'sglang.launch_server') {
    return {
      how: 'not detectable',
      problem:
        `server.sglang-version is auto, but aerie reads SGLang's release through a launcher of the form [python, -m, sglang.launch_server], and server.launcher ${JSON.stringify(launcher)} is not one. ` +
        'Fix: pin server.sglang-version to the release that launcher runs (e.g. 0.5.23)',
    };
  }
  const how = `${m.interpreter} (importlib.metadata)`;
  const r = await host
    .exec([m.interpreter, '-c', 'import importlib.metadata as m; print(m.version("sglang"))'], { timeoutMs: 60_000 })
    .catch((e: Error) => ({ code: -1, stdout: '', stderr: e.message }));
  const found = r.code === 0 ? r.stdout.trim() : '';
  if (!/^\d+\.\d+\.\d+/.test(found)) {
    return {
      how,
      problem: `server.launcher: ${m.interpreter} on ${host.name} has no installed sglang distribution (${r.stderr.trim().slice(-200) || `exit ${r.code}`}). Fix: point server.launcher at SGLang's interpreter, or pin server.sglang-version`,
    };
  }
  // A local or dev build ("0.5.23.post1", "0.5.23+cu129") renders as its release.
  const release = /^\d+\.\d+\.\d+/.exec(found)![0];
  return { version: release, how: found === release ? how : `${how}: ${found}` };
}

/**
 * The host's release, and whether aerie's capture is written for it. `known`: the release
 * preflight already read for the run, so the host is not asked again.
 */
export async function sglangVersion(
  host: Host,
  launcher: readonly string[],
  pin: string,
  known?: { version: string; how: string },
): Promise<SglangVersion> {
  const v: SglangVersion = known ? { ...known } : await resolveSglangVersion(host, launcher, pin);
  if (v.problem) return v;
  if (!(CAPTURE_SGLANG_VERSIONS as readonly string[]).includes(v.version!)) {
    v.problem =
      `stages.extract: aerie's hidden-state capture is written and checked for SGLang ${CAPTURE_SGLANG_VERSIONS.join(' and ')} ` +
      `(py/aerie_hs/sglang_hook.py), and the extraction server runs ${v.version} (${v.how}). Fix: run the extraction on a supported release ` +
      `(its launcher in server.launcher), or use stages.extract.driver: specforge-offline`;
  }
  return v;
}

/**
 * The draft's aux layer ids: `eagle_config.eagle_aux_hidden_state_layer_ids`, else SpecForge's
 * default `[1, L/2 − 1, L − 4]` for an L-layer target (SpecForge@a6b6b023:specforge/algorithms/model_providers.py:204).
 */
export function draftLayerIds(
  draftConfig: unknown,
  targetLayers: number | undefined,
): { ids: number[]; how: string } | { problem: string } {
  const ids = (draftConfig as { eagle_config?: { eagle_aux_hidden_state_layer_ids?: unknown } } | undefined)
    ?.eagle_config?.eagle_aux_hidden_state_layer_ids;
  if (Array.isArray(ids)) {
    if (
      ids.length === 3 &&
      ids.every((x) => Number.isInteger(x) && x >= 0 && (targetLayers === undefined || x < targetLayers))
    ) {
      return { ids: ids as number[], how: "the draft config's eagle_config.eagle_aux_hidden_state_layer_ids" };
    }
    return {
      problem: `the draft config's eagle_config.eagle_aux_hidden_state_layer_ids is ${JSON.stringify(ids)}: three layer ids below the target's ${targetLayers ?? '?'} layers are needed`,
    };
  }
  if (targetLayers === undefined || targetLayers < 8)
    return {
      problem:
        "the draft config names no eagle_aux_hidden_state_layer_ids and the target's num_hidden_layers is unknown",
    };
  return {
    ids: [1, Math.floor(targetLayers / 2) - 1, targetLayers - 4],
    how: `SpecForge's default for a ${targetLayers}-layer target`,
  };
}

/** The target's layer count from its config.json (a text_config inside, for multimodal targets). */
export function targetLayers(modelConfig: unknown): number | undefined {
  const c = modelConfig as { num_hidden_layers?: unknown; text_config?: { num_hidden_layers?: unknown } } | undefined;
  const n = c?.text_config?.num_hidden_layers ?? c?.num_hidden_layers;
  return typeof n === 'number' ? n : undefined;
}

/** The capture cannot run on this host as configured: the message names the field and the fix. */
export class CaptureSetupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CaptureSetupError';
  }
}

export interface ResolvedCapture {
  py: AeriePy;
  spec: CaptureSpec;
  /** The plugin's environment; none for stock SGLang. */
  env?: CaptureEnv;
  dumpDir: string;
  /** Where each setting came from, for the launch notes. */
  notes: string[];
}

async function readJsonOn(host: Host, path: string): Promise<unknown> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch {
    return undefined;
  }
}

/** Stage aerie's Python on the host and work out the capture's launch settings (no launch). */
export async function resolveCapture(
  host: Host,
  config: Config,
  runId: string,
  hiddenDir: string,
  mode: CaptureMode = 'plugin',
  known?: { version: string; how: string },
): Promise<ResolvedCapture> {
  const e = config.stages.extract;
  if (e.driver === 'specforge-offline') throw new Error('resolveCapture: the extract driver starts no server');
  const v = await sglangVersion(host, config.server.launcher, config.server['sglang-version'], known);
  if (v.problem) throw new CaptureSetupError(v.problem);
  const draftPath = e['draft-model-config'] ?? config.stages.train['draft-model-config'];
  const draft = await readJsonOn(host, draftPath);
  if (draft === undefined)
    throw new CaptureSetupError(
      `stages.extract.draft-model-config: ${draftPath} is not a readable JSON file on ${host.name}. Fix: point it (or stages.train.draft-model-config) at the draft config.json`,
    );
  const layers = draftLayerIds(
    draft,
    targetLayers(await readJsonOn(host, `${config.target['model-path']}/config.json`)),
  );
  if ('problem' in layers)
    throw new CaptureSetupError(`stages.extract.draft-model-config (${draftPath}): ${layers.problem}`);
  if (mode !== 'plugin' && v.version !== '0.5.23') {
    throw new CaptureSetupError(
      `stages.extract.driver: stock-server needs SGLang 0.5.23 (--enable-return-aux-hidden-states returns aux states without a draft), and the host runs ${v.version} (${v.how}). Fix: use stages.extract.driver: patched-server`,
    );
  }
  const py = await shipAeriePy(host, e.python);
  const dumpDir = extractDumpDir(config, runId, hiddenDir);
  const what =
    mode === 'plugin'
      ? `aerie's capture plugin, aerie_hs ${py.version}`
      : `stock SGLang, ${mode === 'stock-aux' ? 'aux' : 'final'} pass (client aerie_hs ${py.version} on the host)`;
  return {
    py,
    spec: { sglangVersion: v.version!, draftLayerIds: layers.ids, mode },
    ...(mode === 'plugin' ? { env: { pythonPath: py.root, dumpDir, draftLayerIds: layers.ids } } : {}),
    dumpDir,
    notes: [
      `capture: ${what}; SGLang ${v.version} (${v.how}), draft layers ${JSON.stringify(layers.ids)} (${layers.how}); dumps in ${dumpDir}`,
    ],
  };
}

/**
 * The capture plugin's own verdict on a launch line (py/aerie_hs/sglang_hook.py
 * check_launch_args): the fixes it lists, empty when the launch is fit.
 */
export async function captureLaunchFixes(
  host: Host,
  py: AeriePy,
  version: string,
  argv: readonly string[],
): Promise<string[]> {
  const r = await runAeriePy(host, py, 'sglang_hook', ['check', '--version', version, '--', ...argv], {
    okCodes: [0, 1],
    timeoutMs: 60_000,
  });
  try {
    const verdict = JSON.parse(r.stdout) as { ok?: boolean; fixes?: unknown };
    return Array.isArray(verdict.fixes) ? verdict.fixes.map(String) : [];
  } catch {
    throw new CaptureSetupError(
      `python -m aerie_hs.sglang_hook check on ${host.name} printed no verdict (exit ${r.code}): ${r.stderr.trim().slice(-300)}`,
    );
  }
}
