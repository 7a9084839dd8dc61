/**
 * What aerie knows about each SGLang release it launches: how spec v2 is asked for, which
 * launch flags a release renamed or removed, what /health means there, which info route it
 * serves, and which targets it can run EAGLE-3 for. Pure, and golden-tested
 * (test/sglang/releases.test.ts). Every fact names the wheel it was read from,
 * `sglang==X.Y.Z:<path under sglang/>:<line>`; a release between two read ones gets the
 * older one's facts, and the notes say so.
 */

/** Releases whose wheels these facts were read from (`pip download --no-deps sglang==X`). */
export const READ_RELEASES = ['0.5.4', '0.5.9', '0.5.11', '0.5.12', '0.5.15', '0.5.23'] as const;

/** A config or launch fact that this release cannot honour: the message names the field and the fix. */
export class ReleaseError extends Error {
  override readonly name = 'ReleaseError';
}

export function parseRelease(v: string): [number, number, number] | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)/.exec(v.trim());
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

/** atLeast('0.5.12', '0.5.9') is true; an unparseable release is below everything. */
export function atLeast(version: string, floor: string): boolean {
  const a = parseRelease(version);
  const b = parseRelease(floor)!;
  if (!a) return false;
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! > b[i]!;
  return true;
}

/** "0.5.10 (not read; 0.5.9's facts)" when the facts come from an older read release. */
function readFrom(version: string, read: string): string {
  return version === read ? version : `${version} (not read; ${read}'s facts)`;
}

/** The newest read release at or below this one. */
export function nearestRead(version: string): string | undefined {
  return [...READ_RELEASES].reverse().find((r) => atLeast(version, r));
}

// ---- spec v2 (overlap scheduling of draft and verify) ----------------------------------

export type SpecV2Mode = 'auto' | 'on' | 'off';

export interface SpecV2Launch {
  /** Flags added to the deploy launch. */
  args: string[];
  /** Environment added to the deploy launch. */
  env: Record<string, string>;
  /** What spec v2 is on this release, for the plan and the launch notes. */
  note: string;
}

/** SGLang's EnvBool spellings (sglang==0.5.9:srt/environ.py:121-125). */
function envBool(raw: string | undefined): boolean | undefined {
  if (raw === undefined) return undefined;
  const v = raw.trim().toLowerCase();
  if (['true', '1', 'yes', 'y'].includes(v)) return true;
  if (['false', '0', 'no', 'n'].includes(v)) return false;
  return undefined;
}

const SPEC_V2_ALGORITHMS = ['EAGLE', 'EAGLE3', 'STANDALONE', 'NEXTN'];

/**
 * How `stages.deploy.spec-v2` is rendered on a release. Three eras:
 * - a flag, off by default: `--enable-beta-spec` (sglang==0.5.4:srt/server_args.py:335,2411;
 *   with it the overlap scheduler stays on for EAGLE/EAGLE3, server_args.py:1296-1306);
 * - an environment variable, SGLANG_ENABLE_SPEC_V2: default False in sglang==0.5.9:srt/environ.py:414,
 *   True in sglang==0.5.12:srt/environ.py:470; 0.5.9 refuses it with topk > 1
 *   (sglang==0.5.9:srt/server_args.py:2368-2381), 0.5.12 falls back to spec v1 (server_args.py:3749-3755);
 * - always on: the variable is gone and only warned about (sglang==0.5.15:srt/arg_groups/speculative_hook.py:73-80;
 *   absent from 0.5.23's environ.py), `--disable-overlap-schedule` selects the synchronous path.
 * server.env's SGLANG_ENABLE_SPEC_V2 is read as the same request; one that disagrees with
 * spec-v2, or means nothing on the release, is refused.
 */
export function specV2Launch(
  version: string,
  mode: SpecV2Mode,
  opts: { algorithm: string; eagleTopk?: number; serverEnv?: Record<string, string> },
): SpecV2Launch {
  const raw = opts.serverEnv?.SGLANG_ENABLE_SPEC_V2;
  const fromEnv = envBool(raw);
  if (raw !== undefined && fromEnv === undefined) {
    throw new ReleaseError(
      `server.env sets SGLANG_ENABLE_SPEC_V2=${raw}, which SGLang reads as neither true nor false. Fix: remove it and set stages.deploy.spec-v2: on or off`,
    );
  }
  if (fromEnv !== undefined && mode !== 'auto' && fromEnv !== (mode === 'on')) {
    throw new ReleaseError(
      `server.env sets SGLANG_ENABLE_SPEC_V2=${raw} but stages.deploy.spec-v2 is ${mode}. Fix: remove SGLANG_ENABLE_SPEC_V2 from server.env; stages.deploy.spec-v2 says it`,
    );
  }
  const want: SpecV2Mode = mode !== 'auto' ? mode : fromEnv === undefined ? 'auto' : fromEnv ? 'on' : 'off';
  const applies = SPEC_V2_ALGORITHMS.includes(opts.algorithm.toUpperCase());
  const topk = opts.eagleTopk;

  if (!atLeast(version, '0.5.9')) {
    const v = readFrom(version, '0.5.4');
    if (raw !== undefined) {
      throw new ReleaseError(
        `server.env sets SGLANG_ENABLE_SPEC_V2, which SGLang ${v} does not read (spec v2 is the --enable-beta-spec flag there). Fix: remove it from server.env and set stages.deploy.spec-v2: ${want === 'off' ? 'off' : 'on'}`,
      );
    }
    if (want === 'on')
      return {
        args: ['--enable-beta-spec'],
        env: {},
        note: `spec v2: on, through --enable-beta-spec (SGLang ${v}; off by default there)`,
      };
    return {
      args: [],
      env: {},
      note: `spec v2: off (SGLang ${v}: only --enable-beta-spec turns it on; stages.deploy.spec-v2: on renders it)`,
    };
  }
  if (!atLeast(version, '0.5.15')) {
    const defaultOn = atLeast(version, '0.5.12');
    const v = readFrom(version, defaultOn ? '0.5.12' : '0.5.9');
    const on = want === 'auto' ? defaultOn : want === 'on';
    if (on && applies && topk !== undefined && topk > 1 && !defaultOn) {
      throw new ReleaseError(
        `stages.deploy.spec-v2: SGLang ${v} refuses spec v2 with topk ${topk} ("Spec v2 currently only supports topk = 1"). Fix: set stages.deploy.eagle-topk: 1, or spec-v2: off`,
      );
    }
    const env: Record<string, string> =
      want === 'auto' || raw !== undefined ? {} : { SGLANG_ENABLE_SPEC_V2: on ? 'True' : 'False' };
    const how =
      want === 'auto'
        ? `SGLANG_ENABLE_SPEC_V2 unset, default ${defaultOn ? 'True' : 'False'}`
        : `SGLANG_ENABLE_SPEC_V2=${raw ?? env.SGLANG_ENABLE_SPEC_V2}${raw !== undefined ? ' from server.env' : ''}`;
    const fallback =
      on && applies && topk !== undefined && topk > 1 ? '; with topk > 1 SGLang runs spec v1 anyway' : '';
    return {
      args: [],
      env,
      note: `spec v2 (overlap scheduling of draft and verify): ${on ? 'on' : 'off'} on SGLang ${v} (${how})${fallback}`,
    };
  }
  const v = readFrom(version, atLeast(version, '0.5.23') ? '0.5.23' : '0.5.15');
  if (raw !== undefined) {
    throw new ReleaseError(
      `server.env sets SGLANG_ENABLE_SPEC_V2, which SGLang ${v} no longer reads ("SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker"). Fix: remove it from server.env`,
    );
  }
  if (want === 'off') {
    throw new ReleaseError(
      `stages.deploy.spec-v2: off cannot be had on SGLang ${v}: speculative decoding always runs the V2 worker there. Fix: set spec-v2: auto, and add --disable-overlap-schedule to server.extra-args for the synchronous path`,
    );
  }
  return { args: [], env: {}, note: `spec v2: always on from SGLang 0.5.15 (this host: ${v}); nothing to set` };
}

// ---- EAGLE-3 per target architecture -----------------------------------------------------

/**
 * Targets whose model class gained `set_eagle3_layers_to_capture` (what an EAGLE-3 draft needs
 * from the target, sglang==0.5.9:srt/model_executor/model_runner.py:621-624) only in a later release.
 */
const EAGLE3_TARGET_FROM: Record<string, { from: string; why: string }> = {
  // sglang==0.5.9:srt/models/kimi_k25.py:648 has the class without the method;
  // sglang==0.5.11:srt/models/kimi_k25.py:799-810 and 0.5.12 (same lines) have it; 0.5.4 has no kimi_k25.py.
  KimiK25ForConditionalGeneration: {
    from: '0.5.11',
    why: 'set_eagle3_layers_to_capture arrives in kimi_k25.py in 0.5.11 (0.5.9 has the class without it; 0.5.10 not read)',
  },
};

/** The target's config.json architectures (a multimodal target's wrapper class comes first). */
export function targetArchitectures(modelConfig: unknown): string[] {
  const a = (modelConfig as { architectures?: unknown } | undefined)?.architectures;
  return Array.isArray(a) ? a.filter((x): x is string => typeof x === 'string') : [];
}

/** Why this release cannot serve EAGLE-3 for the target, with the fix; undefined when it can. */
export function eagle3TargetProblem(
  version: string,
  algorithm: string,
  architectures: readonly string[],
): string | undefined {
  if (algorithm.toUpperCase() !== 'EAGLE3') return undefined;
  for (const arch of architectures) {
    const need = EAGLE3_TARGET_FROM[arch];
    if (need && !atLeast(version, need.from)) {
      return (
        `stages.deploy.speculative-algorithm: EAGLE3 needs SGLang ${need.from} or later for a ${arch} target (${need.why}), and the host runs ${version}. ` +
        `Fix: run the deploy on SGLang ${need.from}+ (server.launcher and server.sglang-version)`
      );
    }
  }
  return undefined;
}

// ---- launch flags a release renamed or removed ----------------------------------------------

interface FlagRename {
  old: string;
  new: string;
  /** The first read release where the old spelling is only an alias (or gone) and the new one exists. */
  from: string;
  /** The first read release that rejects the old spelling, if any (0.5.19 still takes all three). */
  removed?: string;
  /** How that release's argparse refuses it (checked against the real parser: test/real/sim-argparse-judge.test.ts). */
  refusal?: string;
  source: string;
}

/** Renames with the same destination field, so the rewrite keeps the meaning exactly. */
const RENAMES: FlagRename[] = [
  {
    old: '--stream-output',
    new: '--incremental-streaming-output',
    from: '0.5.12',
    removed: '0.5.23',
    refusal: 'unrecognized arguments: --stream-output',
    // alias with dest=incremental_streaming_output: sglang==0.5.12:srt/server_args.py:5109-5115, 0.5.15:srt/server_args.py:6189-6195;
    // gone in 0.5.23 (srt/arg_groups/fields/serving.py:274 only); 0.5.9 has only the old one (server_args.py:3348).
    source: 'sglang==0.5.12:srt/server_args.py:5109-5115',
  },
  {
    old: '--cuda-graph-max-bs',
    new: '--cuda-graph-max-bs-decode',
    from: '0.5.15',
    removed: '0.5.23',
    // A prefix of two new flags, so argparse's allow_abbrev makes it ambiguous rather than unknown.
    refusal:
      'ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill',
    // alias with dest=cuda_graph_max_bs_decode: sglang==0.5.15:srt/server_args.py:6243-6249; gone in 0.5.23 (arg_groups/fields/exec_.py:629).
    source: 'sglang==0.5.15:srt/server_args.py:6243-6249',
  },
  {
    old: '--cuda-graph-bs',
    new: '--cuda-graph-bs-decode',
    from: '0.5.15',
    removed: '0.5.23',
    refusal: 'ambiguous option: --cuda-graph-bs could match --cuda-graph-bs-decode, --cuda-graph-bs-prefill',
    // alias with dest=cuda_graph_bs_decode: sglang==0.5.15:srt/server_args.py:6251-6258; gone in 0.5.23 (arg_groups/fields/exec_.py:640).
    source: 'sglang==0.5.15:srt/server_args.py:6251-6258',
  },
];

/**
 * `--disable-cuda-graph` is deprecated from 0.5.15 (sglang==0.5.15:srt/server_args.py:6260-6265,
 * 0.5.23:srt/server_args.py:408-415) in favour of the per-phase backends, and still sets exactly
 * both to disabled (sglang==0.5.23:srt/arg_groups/cuda_graph_hook.py:55-57).
 */
export function noCudaGraphArgs(version: string | undefined): string[] {
  return version !== undefined && atLeast(version, '0.5.15')
    ? ['--cuda-graph-backend-decode', 'disabled', '--cuda-graph-backend-prefill', 'disabled']
    : ['--disable-cuda-graph'];
}

/** Flags aerie renders itself from the config on some release; in extra-args they are refused. */
const OWNED_BY_CONFIG: Record<string, string> = {
  '--enable-beta-spec':
    'spec v2 belongs in stages.deploy.spec-v2 (aerie renders --enable-beta-spec on releases that have it, sglang==0.5.4:srt/server_args.py:2411; 0.5.9 on use SGLANG_ENABLE_SPEC_V2 or nothing)',
};

function nameOf(arg: string): string | undefined {
  if (!arg.startsWith('--')) return undefined;
  const eq = arg.indexOf('=');
  return eq === -1 ? arg : arg.slice(0, eq);
}

/**
 * server.extra-args as this release takes them: a spelling the release renamed (same field) is
 * rewritten and noted, a flag aerie renders from the config is refused with the field to use.
 * Without a known release the args pass as written.
 */
export function releaseExtraArgs(
  version: string | undefined,
  extraArgs: readonly string[],
): { args: string[]; notes: string[] } {
  const notes: string[] = [];
  const args: string[] = [];
  for (const arg of extraArgs) {
    const name = nameOf(arg);
    if (name !== undefined && OWNED_BY_CONFIG[name])
      throw new ReleaseError(
        `server.extra-args sets ${name}: ${OWNED_BY_CONFIG[name]}. Fix: remove it from server.extra-args`,
      );
    if (version === undefined || name === undefined) {
      args.push(arg);
      continue;
    }
    if (name === '--disable-cuda-graph' && atLeast(version, '0.5.15')) {
      if (arg !== name)
        throw new ReleaseError(`server.extra-args: ${arg} takes no value. Fix: write --disable-cuda-graph alone`);
      args.push(...noCudaGraphArgs(version));
      notes.push(
        `server.extra-args: --disable-cuda-graph is deprecated on SGLang ${version} ("Use '--cuda-graph-backend-{decode,prefill}=disabled' instead"); rendered as ${noCudaGraphArgs(version).join(' ')}, the same setting`,
      );
      continue;
    }
    const r = RENAMES.find((x) => x.old === name);
    if (r && atLeast(version, r.from)) {
      args.push(arg === name ? r.new : `${r.new}${arg.slice(name.length)}`);
      const state =
        r.removed && atLeast(version, r.removed)
          ? `removed in ${r.removed} (argparse: "${r.refusal}")`
          : `deprecated there ("Use '${r.new}' instead")`;
      notes.push(
        `server.extra-args: ${r.old} is ${state} on SGLang ${version}; rendered as ${r.new}, the same setting (${r.source})`,
      );
      continue;
    }
    const back = RENAMES.find((x) => x.new === name);
    if (back && !atLeast(version, back.from)) {
      throw new ReleaseError(
        `server.extra-args sets ${back.new}, which SGLang ${version} does not have (it arrives in ${back.from}). Fix: write ${back.old} instead`,
      );
    }
    args.push(arg);
  }
  return { args, notes };
}

// ---- readiness and routes ---------------------------------------------------------------------

/**
 * The health endpoint that really generates on this release. From 0.5.9,
 * SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false makes /health a bare 200 once the server is up
 * (sglang==0.5.9:srt/entrypoints/http_server.py:481-485, environ.py:462; 0.5.12 http_server.py:522-526;
 * 0.5.23 http_server.py:745-749), so readiness asks /health_generate instead. 0.5.4's /health
 * always generates (sglang==0.5.4:srt/entrypoints/http_server.py:403-420).
 */
export function readinessEndpoint(
  version: string | undefined,
  endpoint: '/health' | '/health_generate',
  serverEnv: Record<string, string>,
): { endpoint: '/health' | '/health_generate'; note?: string } {
  const raw = serverEnv.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION;
  if (endpoint !== '/health' || envBool(raw) !== false) return { endpoint };
  if (version !== undefined && !atLeast(version, '0.5.9')) {
    return {
      endpoint,
      note: `server.env sets SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=${raw}, which SGLang ${version} does not read: /health still generates`,
    };
  }
  return {
    endpoint: '/health_generate',
    note: `readiness polls /health_generate, not server.readiness.endpoint /health: server.env sets SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=${raw}, which makes /health answer 200 without generating`,
  };
}

/**
 * Whether to ask /get_server_info and /get_model_info first: 0.5.4 serves only those
 * (sglang==0.5.4:srt/entrypoints/http_server.py:475,496); 0.5.9 on serve both names
 * (sglang==0.5.9:srt/entrypoints/http_server.py:543-593, 0.5.23 http_server.py:802-863).
 */
export function legacyInfoRoutesFirst(version: string | undefined): boolean {
  return version !== undefined && !atLeast(version, '0.5.9');
}

/**
 * The release /server_info reports (`"version": __version__` in every read release,
 * sglang==0.5.4:srt/entrypoints/http_server.py:506, 0.5.23 http_server.py:888) against the one
 * aerie rendered the launch for; undefined when they agree or the server does not say.
 */
export function reportedVersionProblem(expected: string, how: string, reported: unknown): string | undefined {
  if (typeof reported !== 'string' || reported.trim() === '') return undefined;
  const got = reported.trim();
  if (got === expected || (parseRelease(got) !== undefined && parseRelease(got)!.join('.') === expected))
    return undefined;
  const pinned = how === 'server.sglang-version';
  return (
    `server.sglang-version ${pinned ? 'says' : `resolved to`} ${expected}${pinned ? '' : ` (${how})`} but the server reports ${got}: the launch was rendered for the wrong release. ` +
    (pinned
      ? `Fix: set server.sglang-version: ${got} (or auto with a [python, -m, sglang.launch_server] launcher), or point server.launcher at the ${expected} environment`
      : `Fix: pin server.sglang-version: ${got}, or point server.launcher at the interpreter whose sglang the server runs`)
  );
}

/** The target architectures this release cannot serve the algorithm for (for `aerie plan`, which reads no host). */
export function eagle3TargetFloors(version: string, algorithm: string): string[] {
  return Object.keys(EAGLE3_TARGET_FROM).filter(
    (arch) => eagle3TargetProblem(version, algorithm, [arch]) !== undefined,
  );
}

/**
 * The benchmark client's module: `sglang.benchmark.serving` from 0.5.15, where `sglang.bench_serving`
 * is a deprecated alias raising a FutureWarning (sglang==0.5.15:bench_serving.py:1-22, 0.5.23 the same);
 * 0.5.12 and older have only `sglang.bench_serving`.
 */
export function benchServingModule(version: string | undefined): string {
  return version !== undefined && atLeast(version, '0.5.15') ? 'sglang.benchmark.serving' : 'sglang.bench_serving';
}
