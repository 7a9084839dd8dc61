/**
 * What the imitated SGLang release changes, rule by rule, each beside the wheel source it
 * follows (`sglang==X.Y.Z:<path under sglang/>:<line>`, wheels unpacked from PyPI). The HTTP
 * front, the native and OpenAI routes and ServerArgs' post-init ask here instead of testing
 * versions themselves, so every per-release difference lives in one file.
 */
import { randomUUID } from 'node:crypto';
import { type SimRelease, atLeast } from './release.js';

/**
 * /model_info and /server_info exist from 0.5.9 (sglang==0.5.9:srt/entrypoints/http_server.py:553,593);
 * 0.5.4 has only /get_model_info and /get_server_info (sglang==0.5.4:srt/entrypoints/http_server.py:475,496),
 * so the new names get FastAPI's 404 `{"detail":"Not Found"}` there.
 */
export function hasInfoRoutes(release: SimRelease): boolean {
  return atLeast(release, '0.5.9');
}

/**
 * From 0.5.9 the /get_* names still answer but log a deprecation warning each call
 * (sglang==0.5.9:srt/entrypoints/http_server.py:546-549,586-589; 0.5.12 :583-586,623-626;
 * 0.5.23 :805-808,856-859).
 */
export function deprecatedInfoRoute(release: SimRelease, path: string): string | null {
  if (!atLeast(release, '0.5.9')) return null;
  if (path === '/get_model_info')
    return "Endpoint '/get_model_info' is deprecated and will be removed in a future version. Please use '/model_info' instead.";
  if (path === '/get_server_info')
    return "Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead.";
  return null;
}

/** The server's own warmup GET: /get_model_info on 0.5.4 (sglang==0.5.4:srt/entrypoints/http_server.py:1446), /model_info from 0.5.9 (0.5.9 :1678; 0.5.12 :1871; 0.5.23 :2374). */
export function warmupInfoPath(release: SimRelease): string {
  return atLeast(release, '0.5.9') ? '/model_info' : '/get_model_info';
}

/**
 * 0.5.4's /get_model_info has five keys (sglang==0.5.4:srt/entrypoints/http_server.py:478-484);
 * 0.5.9 adds the modality flags, model_type and architectures (sglang==0.5.9:srt/entrypoints/http_server.py:557-570).
 */
export function modelInfoHasArchitecture(release: SimRelease): boolean {
  return atLeast(release, '0.5.9');
}

/**
 * Whether plain /health skips the 1-token probe. 0.5.4 always probes (no such variable:
 * sglang==0.5.4:srt/entrypoints/http_server.py:403-472); from 0.5.9
 * SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION (EnvBool, default True: sglang==0.5.9:srt/environ.py:462;
 * 0.5.12 :536; 0.5.23 :344) set false answers /health 200 once past Starting
 * (sglang==0.5.9:srt/entrypoints/http_server.py:481-485; 0.5.12 :522-526; 0.5.23 :745-749).
 * /health_generate always probes.
 */
export function healthSkipsProbe(release: SimRelease, env: NodeJS.ProcessEnv): boolean {
  if (!atLeast(release, '0.5.9')) return false;
  return !envBool(env.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION, true);
}

/** The probe's rid: time-based before 0.5.23 (sglang==0.5.4:…/http_server.py:421; 0.5.9 :488; 0.5.12 :529), a uuid hex in 0.5.23 (:754). */
export function healthRid(release: SimRelease): string {
  if (atLeast(release, '0.5.23')) return `HEALTH_CHECK_${randomUUID().replace(/-/g, '')}`;
  return `HEALTH_CHECK_${Date.now() / 1000}`;
}

/** EnvBool.parse (sglang==0.5.9:srt/environ.py:119-126): true/1/yes/y, false/0/no/n; anything else keeps the default here. */
export function envBool(raw: string | undefined, fallback: boolean): boolean {
  if (raw === undefined) return fallback;
  const v = raw.toLowerCase();
  if (['true', '1', 'yes', 'y'].includes(v)) return true;
  if (['false', '0', 'no', 'n'].includes(v)) return false;
  return fallback;
}

/**
 * How a streamed /generate chunk carries output_ids and text.
 * 0.5.4: output_ids are the new ids since the last chunk for every stream, text cumulative
 * (sglang==0.5.4:srt/managers/tokenizer_manager.py:1393-1407).
 * 0.5.9: cumulative ids unless --stream-output, which makes only the ids deltas
 * (sglang==0.5.9:srt/managers/tokenizer_manager.py:1550-1566).
 * 0.5.12 and 0.5.23: cumulative unless incremental_streaming_output (--incremental-streaming-output,
 * or 0.5.12's deprecated --stream-output alias: sglang==0.5.12:srt/server_args.py:5109-5115), which makes
 * text and ids both deltas (sglang==0.5.12:srt/managers/tokenizer_manager.py:1747-1779;
 * sglang==0.5.23:srt/managers/tokenizer_manager.py:2629-2660).
 */
export function streamDeltas(release: SimRelease, args: Record<string, unknown>): { ids: boolean; text: boolean } {
  if (!atLeast(release, '0.5.9')) return { ids: true, text: false };
  const flag = Boolean(args.incremental_streaming_output) || Boolean(args.stream_output);
  if (!atLeast(release, '0.5.12')) return { ids: flag, text: false };
  return { ids: flag, text: flag };
}

export interface SpecCounts {
  verifyCt: number;
  completionTokens: number;
  /** Accepted draft tokens (bonus tokens not counted). */
  correctDrafts: number;
  numSteps: number;
  numDraftTokens: number;
  /** [k] = verify steps that accepted k drafts; holes read as 0. */
  histogram?: readonly number[];
}

/**
 * The speculative fields of meta_info, computed only when the request finishes in every release
 * (sglang==0.5.4:srt/managers/tokenizer_manager.py:1431-1433; 0.5.9 :1597-1598; 0.5.12 :1852-1853;
 * 0.5.23 :2755-2756), so streamed chunks before the last carry none.
 */
export function specMeta(release: SimRelease, c: SpecCounts): Record<string, number | number[]> {
  if (!atLeast(release, '0.5.9')) {
    // sglang==0.5.4:srt/managers/tokenizer_manager.py:1593-1616: always the three keys, zeros
    // when nothing was verified; the rate's denominator is verify_ct × speculative_num_steps.
    const m: Record<string, number> = { spec_accept_rate: 0, spec_accept_length: 0, spec_verify_ct: c.verifyCt };
    const total = c.verifyCt * c.numSteps;
    if (c.verifyCt > 0 && total > 0) {
      m.spec_accept_rate = c.correctDrafts / total;
      m.spec_accept_length = c.completionTokens / c.verifyCt;
    }
    return m;
  }
  // From 0.5.9 nothing at all unless something was verified; proposed = verify_ct × (draft tokens − 1).
  const proposed = c.verifyCt * (c.numDraftTokens - 1);
  if (c.verifyCt <= 0 || proposed <= 0) return {};
  const rate = c.correctDrafts / proposed;
  const length = c.completionTokens / c.verifyCt;
  // The accepted-drafts histogram, only when non-empty (sglang==0.5.9:srt/managers/tokenizer_manager.py:1859-1867;
  // 0.5.12 :2143-2155; 0.5.23 :3193-3201): spec_accept_histogram in 0.5.9, spec_correct_drafts_histogram
  // from 0.5.12, which keeps the old name as an alias until 0.5.23 drops it.
  const hist = c.histogram && c.histogram.length > 0 ? Array.from(c.histogram, (v) => v ?? 0) : undefined;
  if (!atLeast(release, '0.5.12')) {
    // sglang==0.5.9:srt/managers/tokenizer_manager.py:1836-1857
    return {
      spec_accept_rate: rate,
      spec_accept_length: length,
      spec_accept_token_num: c.correctDrafts,
      spec_draft_token_num: proposed,
      spec_verify_ct: c.verifyCt,
      ...(hist ? { spec_accept_histogram: hist } : {}),
    };
  }
  const m: Record<string, number | number[]> = {
    spec_accept_rate: rate,
    spec_accept_length: length,
    spec_num_correct_drafts: c.correctDrafts,
    spec_num_proposed_drafts: proposed,
    spec_verify_ct: c.verifyCt,
  };
  if (!atLeast(release, '0.5.23')) {
    // sglang==0.5.12:srt/managers/tokenizer_manager.py:2139-2141, "backward-compat aliases, remove in next release"
    m.spec_accepted_drafts = c.correctDrafts;
    m.spec_proposed_drafts = proposed;
    if (hist) m.spec_accept_histogram = hist;
  }
  if (hist) m.spec_correct_drafts_histogram = hist;
  // sglang==0.5.23:srt/managers/tokenizer_manager.py:3164-3172: the aliases are gone.
  return m;
}

/**
 * A /generate rid already in flight: 400 "Duplicate request ID detected: <rid>" from 0.5.12
 * (sglang==0.5.12:srt/managers/tokenizer_manager.py:2594-2595, in _init_req_state;
 * sglang==0.5.23:srt/managers/tokenizer_manager.py:3835-3836, which also refuses a rid repeated
 * inside one batch). 0.5.4 and 0.5.9 overwrite rid_to_state without a check
 * (sglang==0.5.4:srt/managers/tokenizer_manager.py:865; 0.5.9 :1071).
 */
export function refusesDuplicateRid(release: SimRelease): { inFlight: boolean; inBatch: boolean } {
  return { inFlight: atLeast(release, '0.5.12'), inBatch: atLeast(release, '0.5.23') };
}

const MTP_AUTO_054 = [
  'DeepseekV32ForCausalLM',
  'DeepseekV3ForCausalLM',
  'DeepseekV2ForCausalLM',
  'GptOssForCausalLM',
  'BailingMoeForCausalLM',
  'BailingMoeV2ForCausalLM',
];
const MTP_AUTO_059 = [
  ...MTP_AUTO_054,
  'Glm4MoeForCausalLM',
  'Glm4MoeLiteForCausalLM',
  'GlmMoeDsaForCausalLM',
  'BailingMoeV2_5ForCausalLM',
  'MistralLarge3ForCausalLM',
  'PixtralForConditionalGeneration',
  'MiMoV2FlashForCausalLM',
];
const MTP_AUTO_0512 = [...MTP_AUTO_059, 'MiMoV2ForCausalLM'];

/**
 * (steps, topk, draft tokens) when --speculative-num-steps is not given. STANDALONE 3/1/4 and
 * Llama 5/4/8 in every release; Grok 5/4/8; the DeepSeek-like list 3/1/4. What differs is any
 * other architecture (Qwen2, Mistral, ...): 5/4/8 on 0.5.4 (sglang==0.5.4:srt/server_args.py:3805-3833),
 * 3/1/4 from 0.5.9 (sglang==0.5.9:srt/server_args.py:5741-5775; 0.5.12 :7929-7964;
 * sglang==0.5.23:srt/arg_groups/speculative_hook.py:1430-1462), and the DeepSeek-like list grows.
 */
export function autoSpecParams(release: SimRelease, algorithm: string, arch: string): [number, number, number] {
  if (algorithm === 'STANDALONE') return [3, 1, 4];
  if (arch === 'LlamaForCausalLM') return [5, 4, 8];
  const mtp = atLeast(release, '0.5.12') ? MTP_AUTO_0512 : atLeast(release, '0.5.9') ? MTP_AUTO_059 : MTP_AUTO_054;
  if (mtp.includes(arch)) return [3, 1, 4];
  if (arch === 'Grok1ForCausalLM' || arch === 'Grok1VForCausalLM') return [5, 4, 8];
  return atLeast(release, '0.5.9') ? [3, 1, 4] : [5, 4, 8];
}

/**
 * The 48 cap without --max-running-requests, for EAGLE/EAGLE3/STANDALONE in every release; 0.5.4's
 * line has no override hint (sglang==0.5.4:srt/server_args.py:1290-1294; 0.5.9 :2362-2366;
 * 0.5.12 :3742-3746; sglang==0.5.23:srt/arg_groups/speculative_hook.py:1086-1094).
 */
export function maxRunningResetLine(release: SimRelease): string {
  return atLeast(release, '0.5.9')
    ? 'Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.'
    : 'Max running requests is reset to 48 for speculative decoding.';
}

export interface SpecV2Decision {
  /** disable_overlap_schedule after the rule. */
  disableOverlap: boolean;
  /** Whether the spec v2 worker (overlap) runs. */
  v2: boolean;
  warnings: string[];
}

/**
 * Spec v2 (the overlap scheduler for EAGLE/EAGLE3/STANDALONE), as each release decides it (S2).
 * 0.5.4: --enable-beta-spec, for EAGLE only (sglang==0.5.4:srt/server_args.py:1296-1306).
 * 0.5.9: SGLANG_ENABLE_SPEC_V2, default False (sglang==0.5.9:srt/environ.py:414; server_args.py:2368-2389).
 * 0.5.12: the same variable, default True; topk > 1 or the variable off fall back to spec v1
 * (sglang==0.5.12:srt/environ.py:470; server_args.py:3748-3771).
 * 0.5.15 on: the variable is gone (0.5.15 warns that it was removed: sglang==0.5.15:srt/arg_groups/speculative_hook.py:75-80;
 * 0.5.23 reads nothing), spec v2 always runs, --disable-overlap-schedule picks its synchronous path
 * (sglang==0.5.23:srt/arg_groups/speculative_hook.py:1096-1102).
 */
export function specV2(
  release: SimRelease,
  algorithm: string,
  args: Record<string, unknown>,
  env: NodeJS.ProcessEnv,
): SpecV2Decision {
  const disabled = Boolean(args.disable_overlap_schedule);
  if (!atLeast(release, '0.5.9')) {
    const beta = Boolean(args.enable_beta_spec);
    if (algorithm === 'EAGLE' && beta) {
      return {
        disableOverlap: false,
        v2: true,
        warnings: ['Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on.'],
      };
    }
    if (!beta) {
      return {
        disableOverlap: true,
        v2: false,
        warnings: ['Overlap scheduler is disabled because of using eagle3 and standalone speculative decoding.'],
      };
    }
    // --enable-beta-spec with EAGLE3/STANDALONE: neither branch runs, the flag stays as given.
    return { disableOverlap: disabled, v2: !disabled, warnings: [] };
  }
  if (!atLeast(release, '0.5.12')) {
    if (envBool(env.SGLANG_ENABLE_SPEC_V2, false)) {
      return {
        disableOverlap: false,
        v2: true,
        warnings: ['Spec v2 is enabled for eagle/eagle3 speculative decoding and overlap schedule is turned on.'],
      };
    }
    return {
      disableOverlap: true,
      v2: false,
      warnings: [
        'Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. ' +
          'You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler. ',
      ],
    };
  }
  if (!atLeast(release, '0.5.15')) {
    let reason: string | null = null;
    let off = disabled;
    const topk = args.speculative_eagle_topk;
    if (typeof topk === 'number' && topk > 1 && !off) {
      off = true;
      reason = 'spec v2 currently only supports topk = 1';
    } else if (!envBool(env.SGLANG_ENABLE_SPEC_V2, true) && !off) {
      off = true;
      reason = 'SGLANG_ENABLE_SPEC_V2=False';
    }
    return off
      ? {
          disableOverlap: true,
          v2: false,
          warnings: [
            `Spec v1 is used for eagle/eagle3/standalone speculative decoding because ${reason ?? 'overlap schedule is disabled'}.`,
          ],
        }
      : {
          disableOverlap: false,
          v2: true,
          warnings: ['Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.'],
        };
  }
  return disabled
    ? {
        disableOverlap: true,
        v2: true,
        warnings: ['Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.'],
      }
    : { disableOverlap: false, v2: true, warnings: [] };
}

/**
 * --enable-mixed-chunk under EAGLE-family decoding: turned off with this line through 0.5.12
 * (sglang==0.5.4:srt/server_args.py:1308-1313; 0.5.9 :2391-2396); 0.5.23 keeps it for EAGLE and
 * EAGLE3 (SpeculativeAlgorithm.supports_mixed_chunk: sglang==0.5.23:srt/speculative/spec_info.py:147-158)
 * and words the line with the algorithm otherwise (sglang==0.5.23:srt/arg_groups/speculative_hook.py:1113-1118).
 * null: mixed chunk stays on.
 */
export function mixedChunkOff(release: SimRelease, algorithm: string): string | null {
  if (!atLeast(release, '0.5.23'))
    return 'Mixed chunked prefill is disabled because of using eagle speculative decoding.';
  if (algorithm === 'EAGLE' || algorithm === 'EAGLE3') return null;
  return `Mixed chunked prefill is disabled: ${algorithm} speculative decoding does not support it.`;
}

/**
 * Whether a streamed OpenAI request's ValueError arrives inside a 200 stream (0.5.4, 0.5.9) or as a
 * 400 ErrorResponse before it (0.5.12 on): sources at api-openai.ts refuseServing.
 */
export function openaiStreamErrorInBand(release: SimRelease): boolean {
  return !atLeast(release, '0.5.12');
}
