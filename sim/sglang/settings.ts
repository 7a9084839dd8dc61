/**
 * ServerArgs.__post_init__, simulated: the defaults SGLang fills in, the speculative-decoding
 * rewrites and their warnings (the 48-request cap, topk-1 draft tokens), and the memory
 * figures the startup log reports. Also the simulator's own environment variables.
 */
import type { Parsed, ServerArgs } from './args.js';
import type { SpecShape } from './latency.js';
import { type ModelConfig, isDeepseekLike, kvBytesPerToken, weightGiB } from './model.js';
import { HS_FAULTS, type HsFault } from './capture.js';
import { PyError, auxCaptureError, specParamsAssertion } from './tracebacks.js';
import { autoSpecParams, healthSkipsProbe, maxRunningResetLine, mixedChunkOff, specV2 } from './profile.js';
import { DEFAULT_SIM_RELEASE, type SimRelease, atLeast } from './release.js';

export const FAULTS = [
  'missing-module',
  'exit-during-load',
  'oom-during-load',
  'never-ready',
  'crash-first-decode',
] as const;
export type Fault = (typeof FAULTS)[number];

export interface SimEnv {
  /** Multiplies every startup phase (load, graphs, warmup). */
  timeScale: number;
  /** Multiplies every model step (prefill, decode); 0 = no model delay. */
  decodeScale: number;
  /** Multiplies prefill steps only; defaults to decodeScale (prefill-heavy work such as extraction). */
  prefillScale: number;
  fault: Fault | null;
  faultOnce: string | null;
  /** AERIE_SIM_HS_FAULT: how the capture's dumps go wrong (capture.ts). */
  hsFault: HsFault | null;
  /** AERIE_SIM_HS_FAULT_EVERY: the fault strikes every K-th request (default 1). */
  hsFaultEvery: number;
  /** The SGLang release imitated (release.ts); every per-release rule reads it (profile.ts). */
  release: SimRelease;
  /** The launch's environment, for the SGLANG_* variables a release reads. */
  procEnv: NodeJS.ProcessEnv;
  /** Plain /health answers 200 without a probe (profile.ts healthSkipsProbe). */
  healthSkipsProbe: boolean;
  healthTimeoutS: number;
}

export class SimEnvError extends Error {}

function scale(env: NodeJS.ProcessEnv, name: string): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return 1;
  const v = Number(raw);
  if (!Number.isFinite(v) || v < 0) throw new SimEnvError(`${name} must be a number >= 0, got '${raw}'`);
  return v;
}

export function readSimEnv(env: NodeJS.ProcessEnv, release: SimRelease = DEFAULT_SIM_RELEASE): SimEnv {
  const fault = env.AERIE_SIM_FAULT || null;
  if (fault !== null && !(FAULTS as readonly string[]).includes(fault)) {
    throw new SimEnvError(`AERIE_SIM_FAULT must be one of ${FAULTS.join(', ')}; got '${fault}'`);
  }
  const hsFault = env.AERIE_SIM_HS_FAULT || null;
  if (hsFault !== null && !(HS_FAULTS as readonly string[]).includes(hsFault)) {
    throw new SimEnvError(`AERIE_SIM_HS_FAULT must be one of ${HS_FAULTS.join(', ')}; got '${hsFault}'`);
  }
  const every = env.AERIE_SIM_HS_FAULT_EVERY ?? '';
  if (every !== '' && !/^[1-9]\d*$/.test(every))
    throw new SimEnvError(`AERIE_SIM_HS_FAULT_EVERY must be a positive integer, got '${every}'`);
  return {
    timeScale: scale(env, 'AERIE_SIM_TIME_SCALE'),
    decodeScale: scale(env, 'AERIE_SIM_DECODE_SCALE'),
    prefillScale: env.AERIE_SIM_PREFILL_SCALE
      ? scale(env, 'AERIE_SIM_PREFILL_SCALE')
      : scale(env, 'AERIE_SIM_DECODE_SCALE'),
    fault: fault as Fault | null,
    faultOnce: env.AERIE_SIM_FAULT_ONCE || null,
    hsFault: hsFault as HsFault | null,
    hsFaultEvery: every === '' ? 1 : Number(every),
    release,
    procEnv: env,
    healthSkipsProbe: healthSkipsProbe(release, env),
    healthTimeoutS: Number(env.SGLANG_HEALTH_CHECK_TIMEOUT) > 0 ? Number(env.SGLANG_HEALTH_CHECK_TIMEOUT) : 20,
  };
}

export const GPU_TOTAL_GIB = 79.1;
export const CUDA_GRAPH_GIB = 0.54;

export interface Resolved {
  args: ServerArgs;
  warnings: string[];
  /** After NEXTN → EAGLE; null when not speculative. */
  algorithm: string | null;
  spec: SpecShape | null;
  contextLen: number;
  maxRunning: number;
  maxTotalTokens: number;
  maxReqInputLen: number;
  cudaGraphMaxBs: number;
  memory: { availStart: number; weights: number; availAfterLoad: number; kvGiB: number; availAfterPool: number };
}

/**
 * --enable-return-aux-hidden-states: aux capture on a target without a draft; the speculative
 * algorithm only names the capture convention and is reset to None, so no draft is loaded
 * (sglang==0.5.23:sglang/srt/arg_groups/validation_hook.py:697-760, same checks and wording).
 */
function handleAuxHiddenStateCapture(a: ServerArgs): void {
  const ids = a.return_aux_hidden_state_layer_ids as number[] | null;
  a.aux_hidden_state_capture = null;
  if (!a.enable_return_aux_hidden_states) {
    if (ids !== null)
      throw new PyError(
        auxCaptureError('--return-aux-hidden-state-layer-ids requires --enable-return-aux-hidden-states.'),
      );
    return;
  }
  const method = String(a.speculative_algorithm ?? '').toUpperCase();
  if (!['EAGLE3', 'DFLASH', 'DSPARK'].includes(method)) {
    throw new PyError(
      auxCaptureError(
        '--enable-return-aux-hidden-states needs --speculative-algorithm EAGLE3, DFLASH or DSPARK to name ' +
          `the capture convention, got ${a.speculative_algorithm === null ? 'None' : `'${a.speculative_algorithm}'`}.`,
      ),
    );
  }
  if (a.speculative_draft_model_path !== null) {
    throw new PyError(
      auxCaptureError(
        '--enable-return-aux-hidden-states captures without a draft; drop --speculative-draft-model-path.',
      ),
    );
  }
  if (a.pp_size !== 1) {
    throw new PyError(
      auxCaptureError(
        '--enable-return-aux-hidden-states only supports pp_size == 1: the capture hooks only see the layers on the last pipeline rank.',
      ),
    );
  }
  if (ids !== null) {
    if (ids.some((i) => i < 0))
      throw new PyError(
        auxCaptureError(`--return-aux-hidden-state-layer-ids must be non-negative, got [${ids.join(', ')}].`),
      );
    if (new Set(ids).size !== ids.length)
      throw new PyError(
        auxCaptureError(`--return-aux-hidden-state-layer-ids must not repeat a layer, got [${ids.join(', ')}].`),
      );
  }
  a.speculative_algorithm = null;
  a.aux_hidden_state_capture = method.toLowerCase();
}

/** Apply SGLang's post-init rules; throws PyError where SGLang would raise. */
export function resolveServerArgs(parsed: Parsed, target: ModelConfig, env: SimEnv): Resolved {
  const a: ServerArgs = { ...parsed.args };
  const warnings: string[] = [];
  a.tokenizer_path ??= a.model_path;
  a.served_model_name ??= a.model_path;
  a.mem_fraction_static ??= 0.88;
  a.chunked_prefill_size ??= 8192;
  a.page_size ??= 1;
  a.device ??= 'cuda';
  a.attention_backend ??= 'fa3';
  a.sampling_backend ??= 'flashinfer';
  a.random_seed ??= Math.floor(Math.random() * 2 ** 30);

  handleAuxHiddenStateCapture(a);
  // sglang==0.5.23:sglang/srt/arg_groups/serving_hook.py:712-727
  if (
    (a.return_hidden_states_mode ?? null) === null &&
    (a.enable_return_hidden_states || a.enable_return_aux_hidden_states)
  ) {
    a.return_hidden_states_mode = 'full';
  }
  // 0.5.12 on take the algorithm in any case (sglang==0.5.12:srt/server_args.py:3562;
  // sglang==0.5.23:srt/arg_groups/speculative_hook.py:138-143); 0.5.4 and 0.5.9 have argparse choices.
  if (atLeast(env.release, '0.5.12') && typeof a.speculative_algorithm === 'string')
    a.speculative_algorithm = a.speculative_algorithm.toUpperCase();
  let algorithm = (a.speculative_algorithm as string | null) ?? null;
  let spec: SpecShape | null = null;
  if (algorithm === 'NEXTN') algorithm = a.speculative_algorithm = 'EAGLE';
  if (algorithm === 'EAGLE' || algorithm === 'EAGLE3' || algorithm === 'STANDALONE') {
    if (a.max_running_requests === null) {
      a.max_running_requests = 48;
      warnings.push(maxRunningResetLine(env.release));
    }
    const v2 = specV2(env.release, algorithm, a, env.procEnv);
    a.disable_overlap_schedule = v2.disableOverlap;
    warnings.push(...v2.warnings);
    if (a.enable_mixed_chunk) {
      const off = mixedChunkOff(env.release, algorithm);
      if (off !== null) {
        a.enable_mixed_chunk = false;
        warnings.push(off);
      }
    }
    if (isDeepseekLike(target)) {
      if (a.speculative_draft_model_path === null) a.speculative_draft_model_path = a.model_path;
      else warnings.push('DeepSeek MTP does not require setting speculative_draft_model_path.');
    }
    if (a.speculative_num_steps === null) {
      if (a.speculative_eagle_topk !== null || a.speculative_num_draft_tokens !== null)
        throw new PyError(specParamsAssertion());
      [a.speculative_num_steps, a.speculative_eagle_topk, a.speculative_num_draft_tokens] = autoSpecParams(
        env.release,
        algorithm,
        target.architectures[0] ?? 'LlamaForCausalLM',
      );
    }
    a.speculative_eagle_topk ??= 1;
    const steps = a.speculative_num_steps as number;
    if (a.speculative_eagle_topk === 1 && a.speculative_num_draft_tokens !== steps + 1) {
      warnings.push(
        'speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1',
      );
      a.speculative_num_draft_tokens = steps + 1;
    }
    spec = {
      numSteps: steps,
      topk: a.speculative_eagle_topk as number,
      numDraftTokens: a.speculative_num_draft_tokens as number,
    };
  } else if (algorithm === 'NGRAM') {
    if (a.max_running_requests === null) {
      a.max_running_requests = 48;
      // Silent on 0.5.4 (sglang==0.5.4:srt/server_args.py:1374-1375), a warning from 0.5.9 (sglang==0.5.9:srt/server_args.py:2467-2471).
      if (atLeast(env.release, '0.5.9')) warnings.push(maxRunningResetLine(env.release));
    }
    a.disable_overlap_schedule = true;
    a.enable_mixed_chunk = false;
    a.speculative_eagle_topk = 10;
    a.speculative_num_draft_tokens ??= 12;
    warnings.push(
      'The overlap scheduler and mixed chunked prefill are disabled because of using ngram speculative decoding.',
    );
    // The n-gram table lookup runs on the CPU: no draft forwards to pay for.
    spec = { numSteps: 0, topk: 1, numDraftTokens: a.speculative_num_draft_tokens as number };
  }

  const tp = a.tp_size as number;
  const contextLen = (a.context_length as number | null) ?? target.maxPositionEmbeddings;
  const availStart = GPU_TOTAL_GIB - 0.55;
  const weights = weightGiB(target, tp);
  const availAfterLoad = availStart - weights;
  const kvGiB = Math.max(0.5, GPU_TOTAL_GIB * (a.mem_fraction_static as number) - weights - 0.6);
  let maxTotalTokens = Math.floor((kvGiB * 2 ** 30) / kvBytesPerToken(target, tp));
  if (typeof a.max_total_tokens === 'number') maxTotalTokens = Math.min(maxTotalTokens, a.max_total_tokens);
  const maxRunning =
    (a.max_running_requests as number | null) ??
    Math.min(4096, Math.max(2048, Math.floor((maxTotalTokens / contextLen) * 512)));
  const cudaGraphMaxBs = (a.cuda_graph_max_bs as number | null) ?? Math.min(256, maxRunning);
  return {
    args: a,
    warnings,
    algorithm,
    spec,
    contextLen,
    maxRunning,
    maxTotalTokens,
    maxReqInputLen: Math.min(contextLen - 1, maxTotalTokens - 1),
    cudaGraphMaxBs,
    memory: { availStart, weights, availAfterLoad, kvGiB, availAfterPool: availAfterLoad - kvGiB },
  };
}
