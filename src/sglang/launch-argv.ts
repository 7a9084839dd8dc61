/**
 * The argv and environment that start an SGLang server. Pure: the same spec always renders
 * the same argv, so launches are golden-tested and a re-attach can compare argv hashes.
 * With the host's release known (spec.sglangVersion) the line is rendered for it (releases.ts).
 */
import { noCudaGraphArgs, releaseExtraArgs, specV2Launch, type SpecV2Mode } from './releases.js';

export type SpeculativeAlgorithmName = 'EAGLE' | 'EAGLE3' | 'NEXTN' | 'STANDALONE' | 'NGRAM';

export interface SpeculativeSpec {
  algorithm: SpeculativeAlgorithmName;
  draftModelPath?: string;
  numSteps?: number;
  eagleTopk?: number;
  numDraftTokens?: number;
}

export interface ServerLaunchSpec {
  /** argv that starts the server, e.g. ['python3', '-m', 'sglang.launch_server']. */
  launcher: string[];
  modelPath: string;
  port: number;
  /** Default 127.0.0.1: servers are reached through Host.httpBase, never exposed. */
  host?: string;
  tpSize: number;
  memFractionStatic?: number;
  maxRunningRequests?: number;
  speculative?: SpeculativeSpec;
  /** Hidden-state extraction profile (incident 6): no CUDA graphs, no radix cache, no speculation. */
  extraction?: boolean;
  /** aerie's capture on this extraction launch (py/aerie_hs/CAPTURE.md): the flags its SGLang release needs. */
  capture?: CaptureSpec;
  /** The host's SGLang release (server.sglang-version, resolved at preflight); unknown when absent. */
  sglangVersion?: string;
  /** stages.deploy.spec-v2, rendered per release on a speculative launch (auto when absent). */
  specV2?: SpecV2Mode;
  extraArgs: string[];
}

/**
 * Where an extraction launch's hidden states come from: aerie's capture plugin (`plugin`), or
 * stock SGLang returning them over HTTP, one pass for the aux states and one for the final state
 * (`stock-aux`, `stock-final`; py/aerie_hs/CAPTURE.md "Stock path").
 */
export type CaptureMode = 'plugin' | 'stock-aux' | 'stock-final';

/** What the capture needs from the launch line, per SGLang release. */
export interface CaptureSpec {
  sglangVersion: string;
  /** The draft config's eagle_aux_hidden_state_layer_ids; SGLang captures at id + 1. */
  draftLayerIds: number[];
  /** plugin when absent. */
  mode?: CaptureMode;
}

/** The SGLang releases aerie's capture is written and checked for (py/aerie_hs/sglang_targets.py TARGETS). */
export const CAPTURE_SGLANG_VERSIONS = ['0.5.12', '0.5.23'] as const;

export const DEFAULT_SERVER_HOST = '127.0.0.1';

/**
 * SGLang's own fallback when speculative decoding runs without --max-running-requests.
 * It logs a warning and silently queues everything above it (incident 7).
 */
export const SPECULATIVE_DEFAULT_MAX_RUNNING = 48;

/** Every spelling SGLang's argparse accepts for a flag aerie renders itself. */
const MANAGED_FLAGS: Record<string, string[]> = {
  '--model-path': ['--model-path', '--model'],
  '--host': ['--host'],
  '--port': ['--port'],
  '--tp-size': ['--tp-size', '--tp', '--tensor-parallel-size'],
  '--mem-fraction-static': ['--mem-fraction-static'],
  '--max-running-requests': ['--max-running-requests'],
};

/**
 * Speculative flags are refused in extra-args outright: set there they would bypass the
 * drafter check (incident 3) and the identity check that compares what we launched.
 */
const SPECULATIVE_FLAG_PREFIX = '--speculative-';

/** The flag name of an argv element: '--port=3000' → '--port'; non-flags → undefined. */
export function flagName(arg: string): string | undefined {
  if (!arg.startsWith('--')) return undefined;
  const eq = arg.indexOf('=');
  return eq === -1 ? arg : arg.slice(0, eq);
}

/**
 * Whether argparse reads `name` as one of these spellings: exactly, or as an abbreviation
 * (allow_abbrev, on in every release: `--mem-frac 0.9` sets --mem-fraction-static). No real
 * flag of 0.5.4-0.5.23 is itself a prefix of a spelling aerie manages but the --model alias
 * (sim/sglang/args-flags.json), so a prefix is never another flag; an ambiguous one argparse refuses anyway.
 */
export function spells(name: string, spellings: readonly string[]): boolean {
  return spellings.includes(name) || (name.length > 2 && spellings.some((s) => s.startsWith(name)));
}

/** The value given for any spelling of a flag in an argv, or undefined when absent. */
export function flagValue(args: readonly string[], spellings: readonly string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const name = flagName(args[i]);
    if (name === undefined || !spells(name, spellings)) continue;
    const eq = args[i].indexOf('=');
    if (eq !== -1) return args[i].slice(eq + 1);
    return args[i + 1];
  }
  return undefined;
}

function requireInt(value: number, what: string, min: number, max = Number.MAX_SAFE_INTEGER): void {
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new Error(
      `${what} must be an integer from ${min}${max === Number.MAX_SAFE_INTEGER ? ' up' : ` to ${max}`}, got ${value}`,
    );
  }
}

/** Throws with a sentence naming the field when the spec cannot be launched as written. */
export function validateLaunchSpec(spec: ServerLaunchSpec): void {
  if (spec.launcher.length === 0 || spec.launcher.some((a) => a.length === 0)) {
    throw new Error('launcher must be a non-empty argv without empty elements');
  }
  if (spec.modelPath.length === 0) throw new Error('modelPath must not be empty');
  requireInt(spec.port, 'port', 1, 65535);
  requireInt(spec.tpSize, 'tpSize', 1);
  if (spec.host !== undefined && spec.host.length === 0) throw new Error('host must not be empty when given');
  if (spec.memFractionStatic !== undefined && !(spec.memFractionStatic > 0 && spec.memFractionStatic < 1)) {
    throw new Error(`memFractionStatic must be between 0 and 1 (exclusive), got ${spec.memFractionStatic}`);
  }
  if (spec.maxRunningRequests !== undefined) requireInt(spec.maxRunningRequests, 'maxRunningRequests', 1);

  for (const [canonical, spellings] of Object.entries(MANAGED_FLAGS)) {
    const renderedAlways =
      canonical === '--model-path' || canonical === '--host' || canonical === '--port' || canonical === '--tp-size';
    const renderedNow =
      renderedAlways ||
      (canonical === '--mem-fraction-static' && spec.memFractionStatic !== undefined) ||
      (canonical === '--max-running-requests' && spec.maxRunningRequests !== undefined);
    // argparse keeps the last value, so a duplicate in extra-args would silently replace ours.
    const given = renderedNow
      ? spec.extraArgs.map(flagName).find((n) => n !== undefined && spells(n, spellings))
      : undefined;
    if (given !== undefined) {
      const read = spellings.includes(given) ? '' : ` (${given}, which argparse reads as ${canonical})`;
      throw new Error(
        `extra-args sets ${canonical}${read}, which aerie sets itself from the config; remove it from extra-args`,
      );
    }
  }
  const specFlag = spec.extraArgs.find((a) => {
    const name = flagName(a);
    return (
      name !== undefined &&
      (name.startsWith(SPECULATIVE_FLAG_PREFIX) || (name.length > 2 && SPECULATIVE_FLAG_PREFIX.startsWith(name)))
    );
  });
  if (specFlag !== undefined) {
    throw new Error(
      `extra-args sets ${flagName(specFlag)}; speculative settings belong in stages.deploy, where aerie checks the drafter before launch`,
    );
  }

  if (spec.capture && spec.sglangVersion !== undefined && spec.capture.sglangVersion !== spec.sglangVersion) {
    throw new Error(
      `the capture is set up for SGLang ${spec.capture.sglangVersion} but the launch renders for ${spec.sglangVersion}`,
    );
  }
  // Refusals of flags this release renamed away or that the config owns (releases.ts).
  releaseExtraArgs(spec.sglangVersion, spec.extraArgs);

  if (spec.capture) {
    if (!spec.extraction) throw new Error('the hidden-state capture runs only on an extraction launch');
    if (!(CAPTURE_SGLANG_VERSIONS as readonly string[]).includes(spec.capture.sglangVersion)) {
      throw new Error(
        `aerie's hidden-state capture supports SGLang ${CAPTURE_SGLANG_VERSIONS.join(' and ')}, not ${spec.capture.sglangVersion}; ` +
          "pin server.sglang-version to the host's release and run a supported one for extraction",
      );
    }
    if (spec.capture.mode?.startsWith('stock') && spec.capture.sglangVersion !== '0.5.23') {
      throw new Error(
        `stock SGLang returns aux hidden states without a draft only from 0.5.23 (--enable-return-aux-hidden-states); this host runs ${spec.capture.sglangVersion}: use stages.extract.driver: patched-server`,
      );
    }
    const ids = spec.capture.draftLayerIds;
    if (ids.length !== 3 || !ids.every((x) => Number.isInteger(x) && x >= 0)) {
      throw new Error(
        `the draft config's eagle_aux_hidden_state_layer_ids must be three layer ids, got ${JSON.stringify(ids)}`,
      );
    }
  }
  const s = spec.speculative;
  if (s === undefined) return;
  if (spec.extraction) {
    throw new Error(
      'extraction mode cannot use speculative decoding: the hidden states must come from the target alone',
    );
  }
  if ((s.algorithm === 'EAGLE3' || s.algorithm === 'STANDALONE') && !s.draftModelPath) {
    throw new Error(`speculative algorithm ${s.algorithm} needs a draft model path`);
  }
  if (s.algorithm === 'NGRAM' && s.draftModelPath) {
    throw new Error('speculative algorithm NGRAM uses no draft model; remove the draft model path');
  }
  if (s.draftModelPath !== undefined && s.draftModelPath.length === 0)
    throw new Error('draftModelPath must not be empty when given');
  if (s.numSteps !== undefined) requireInt(s.numSteps, 'speculative numSteps', 1);
  if (s.eagleTopk !== undefined) requireInt(s.eagleTopk, 'speculative eagleTopk', 1);
  if (s.numDraftTokens !== undefined) requireInt(s.numDraftTokens, 'speculative numDraftTokens', 1);
}

/** The full argv: launcher, then aerie's flags in a fixed order, then extra-args verbatim. */
export function renderServerArgv(spec: ServerLaunchSpec): string[] {
  validateLaunchSpec(spec);
  const argv = [
    ...spec.launcher,
    '--model-path',
    spec.modelPath,
    '--host',
    spec.host ?? DEFAULT_SERVER_HOST,
    '--port',
    String(spec.port),
    '--tp-size',
    String(spec.tpSize),
  ];
  if (spec.memFractionStatic !== undefined) argv.push('--mem-fraction-static', String(spec.memFractionStatic));
  if (spec.maxRunningRequests !== undefined) argv.push('--max-running-requests', String(spec.maxRunningRequests));
  const s = spec.speculative;
  if (s !== undefined) {
    argv.push('--speculative-algorithm', s.algorithm);
    if (s.draftModelPath !== undefined) argv.push('--speculative-draft-model-path', s.draftModelPath);
    if (s.numSteps !== undefined) argv.push('--speculative-num-steps', String(s.numSteps));
    if (s.eagleTopk !== undefined) argv.push('--speculative-eagle-topk', String(s.eagleTopk));
    if (s.numDraftTokens !== undefined) argv.push('--speculative-num-draft-tokens', String(s.numDraftTokens));
    if (spec.sglangVersion !== undefined)
      argv.push(
        ...specV2Launch(spec.sglangVersion, spec.specV2 ?? 'auto', { algorithm: s.algorithm, eagleTopk: s.eagleTopk })
          .args,
      );
  }
  if (spec.extraction) {
    // Each release gets its own spelling of "no CUDA graphs" (releases.ts noCudaGraphArgs;
    // judged by its parser: test/real/sglang-argparse.test.ts).
    argv.push(...noCudaGraphArgs(spec.sglangVersion ?? spec.capture?.sglangVersion));
    argv.push('--disable-radix-cache');
  }
  const c = spec.capture;
  if (c && c.mode !== 'stock-final' && c.sglangVersion === '0.5.23') {
    // sglang==0.5.23:srt/arg_groups/fields/exec_.py:130-156: aux capture on a target serving
    // no draft; --speculative-algorithm then only names the EAGLE3 convention and is reset
    // (arg_groups/validation_hook.py:697-760). The ids are the draft's: models/llama.py:938-941
    // adds 1. On 0.5.12 the plugin turns the capture on itself (AERIE_HS_AUX_LAYERS).
    argv.push(
      '--enable-return-aux-hidden-states',
      '--speculative-algorithm',
      'EAGLE3',
      '--return-aux-hidden-state-layer-ids',
      ...c.draftLayerIds.map(String),
    );
  }
  // The final post-norm state comes back only from a server without the aux flag (exec_.py:112-116).
  if (c?.mode === 'stock-final') argv.push('--enable-return-hidden-states');
  // Stock processing stores only the last chunk's rows (scheduler_components/batch_result_processor.py:308-312,335);
  // the plugin stitches every chunk and needs no such flag.
  if (c?.mode?.startsWith('stock')) argv.push('--chunked-prefill-size', '-1');
  argv.push(...releaseExtraArgs(spec.sglangVersion, spec.extraArgs).args);
  return argv;
}

/**
 * What rendering for the host's release changed or means, for the launch notes and the plan:
 * extra-args rewritten to the release's spelling, and what spec v2 is on a speculative launch.
 * Throws (ReleaseError) where server.env asks the release for something it cannot do.
 */
export function releaseNotes(spec: ServerLaunchSpec, serverEnv: Record<string, string>): string[] {
  const v = spec.sglangVersion;
  if (v === undefined) return [];
  const notes = [...releaseExtraArgs(v, spec.extraArgs).notes];
  const s = spec.speculative;
  if (s !== undefined)
    notes.push(
      specV2Launch(v, spec.specV2 ?? 'auto', { algorithm: s.algorithm, eagleTopk: s.eagleTopk, serverEnv }).note,
    );
  return notes;
}

/** Where aerie's capture is staged on the host and what it captures (extract stage). */
export interface CaptureEnv {
  /** The folder holding aerie_hs/ and its plugin dist-info: put first on PYTHONPATH. */
  pythonPath: string;
  /** The run's dump folder (AERIE_HS_DUMP_DIR). */
  dumpDir: string;
  draftLayerIds: number[];
}

/**
 * The server's environment. Extraction adds aerie's capture: its package first on PYTHONPATH
 * (SGLang discovers the plugin through the dist-info there, sglang==0.5.23:srt/plugins/__init__.py:28-55),
 * the dump folder and the layers. A base that would hide the plugin or send the dumps
 * elsewhere is refused, because the dumps would land where nobody converts them (incident 6).
 */
export function serverLaunchEnv(
  base: Record<string, string>,
  capture?: CaptureEnv,
  spec?: ServerLaunchSpec,
): Record<string, string> {
  // Python block-buffers stdout into a log file; the readiness phase is read from that log.
  const env: Record<string, string> = { PYTHONUNBUFFERED: '1', ...base };
  const s = spec?.speculative;
  if (s !== undefined && spec?.sglangVersion !== undefined) {
    Object.assign(
      env,
      specV2Launch(spec.sglangVersion, spec.specV2 ?? 'auto', {
        algorithm: s.algorithm,
        eagleTopk: s.eagleTopk,
        serverEnv: base,
      }).env,
    );
  }
  if (capture === undefined) return env;
  if (!capture.dumpDir.startsWith('/'))
    throw new Error(`stages.extract.dump-dir must be an absolute path, got "${capture.dumpDir}"`);
  const already = base.AERIE_HS_DUMP_DIR;
  if (already !== undefined && already !== capture.dumpDir) {
    throw new Error(
      `server.env sets AERIE_HS_DUMP_DIR=${already}, but extraction dumps to ${capture.dumpDir}; remove it from server.env`,
    );
  }
  // SGLANG_PLUGINS is a whitelist of plugin names (sglang==0.5.23:srt/plugins/__init__.py:52-55).
  const allowed = base.SGLANG_PLUGINS;
  if (
    allowed &&
    !allowed
      .split(',')
      .map((x) => x.trim())
      .includes('aerie_hs_capture')
  ) {
    throw new Error(
      `server.env sets SGLANG_PLUGINS=${allowed}, which leaves out aerie's capture; add aerie_hs_capture to it (comma-separated)`,
    );
  }
  env.AERIE_HS_DUMP_DIR = capture.dumpDir;
  env.AERIE_HS_AUX_LAYERS = JSON.stringify(capture.draftLayerIds);
  env.PYTHONPATH = base.PYTHONPATH ? `${capture.pythonPath}:${base.PYTHONPATH}` : capture.pythonPath;
  return env;
}

/** The --max-running-requests a spec will run with, from the spec or from extra-args. */
export function effectiveMaxRunningRequests(spec: ServerLaunchSpec): number | undefined {
  if (spec.maxRunningRequests !== undefined) return spec.maxRunningRequests;
  const raw = flagValue(spec.extraArgs, MANAGED_FLAGS['--max-running-requests']);
  if (raw === undefined) return undefined;
  const n = Number(raw);
  return Number.isFinite(n) ? n : undefined;
}

/**
 * Incident 7: a speculative server without --max-running-requests runs at most 48 requests
 * and queues the rest, so a sweep to 250 measures queueing. Set it from the sweep's highest
 * concurrency, and say so; an explicit lower setting is kept but noted.
 */
export function benchmarkReadyArgs(
  spec: ServerLaunchSpec,
  maxConcurrency: number,
): { spec: ServerLaunchSpec; notes: string[] } {
  requireInt(maxConcurrency, 'maxConcurrency', 1);
  const notes: string[] = [];
  const explicit = effectiveMaxRunningRequests(spec);
  if (explicit === undefined) {
    if (spec.speculative !== undefined && maxConcurrency > SPECULATIVE_DEFAULT_MAX_RUNNING) {
      notes.push(
        `set --max-running-requests ${maxConcurrency}: with speculative decoding SGLang otherwise caps running requests at ` +
          `${SPECULATIVE_DEFAULT_MAX_RUNNING} and queues the rest, but the benchmark goes up to concurrency ${maxConcurrency}`,
      );
      return { spec: { ...spec, maxRunningRequests: maxConcurrency }, notes };
    }
    return { spec, notes };
  }
  if (explicit < maxConcurrency) {
    notes.push(
      `--max-running-requests is ${explicit}, below the benchmark's highest concurrency ${maxConcurrency}: ` +
        `levels above ${explicit} will queue on the server`,
    );
  }
  return { spec, notes };
}
