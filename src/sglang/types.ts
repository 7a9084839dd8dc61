/**
 * Request and response shapes of the SGLang HTTP API that aerie uses (native /generate and
 * OpenAI-compatible /v1/chat/completions, non-streaming). Field names are SGLang's own.
 */

export interface SamplingParams {
  /** Default 128. */
  max_new_tokens?: number;
  /** Default 1.0; below 1e-6 means greedy. */
  temperature?: number;
  top_p?: number;
  /** -1 = all tokens. */
  top_k?: number;
  min_p?: number;
  repetition_penalty?: number;
  min_new_tokens?: number;
  ignore_eos?: boolean;
  skip_special_tokens?: boolean;
  stop?: string | string[];
  stop_token_ids?: number[];
  n?: number;
}

/** One prompt, as text or token ids (a list of prompts would change the response shape). */
export interface GenerateRequest {
  text?: string;
  input_ids?: number[];
  sampling_params?: SamplingParams;
  rid?: string;
  return_logprob?: boolean;
  return_hidden_states?: boolean;
}

export interface FinishReason {
  /** 'stop', 'length' or 'abort'. */
  type: string;
  matched?: number | string | null;
  length?: number;
  message?: string;
}

/**
 * meta_info of /generate. On a stream the speculative fields come only on the finished chunk
 * (sglang==0.5.4:srt/managers/tokenizer_manager.py:1430-1433, 0.5.12 :1852-1853, 0.5.23 :2755-2756),
 * and completion_tokens is cumulative on every chunk, which is what aerie counts; output_ids is
 * a delta per chunk on 0.5.4 (tokenizer_manager.py:1394-1398) and with --incremental-streaming-output
 * (0.5.23 :2637-2647, where text is a delta too), so aerie never counts tokens from it.
 */
export interface MetaInfo {
  id: string;
  finish_reason: FinishReason | null;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  e2e_latency?: number;
  /** Verify steps; in every read release 0.5.4–0.5.23 (0.5.4 tokenizer_manager.py:1595, 0.5.23 :3172). */
  spec_verify_ct?: number;
  /** completion_tokens / spec_verify_ct, bonus token included; 0.5.4–0.5.23 (0.5.4 writes 0 before the first verify, :1594). */
  spec_accept_length?: number;
  spec_accept_rate?: number;
  /** 0.5.9 only among the read releases (tokenizer_manager.py:1855-1856); gone by 0.5.12. */
  spec_accept_token_num?: number;
  spec_draft_token_num?: number;
  /** 0.5.12 on (tokenizer_manager.py:2135-2136; 0.5.23 :3170-3171). */
  spec_num_correct_drafts?: number;
  spec_num_proposed_drafts?: number;
  /** 0.5.12's backward-compat aliases of the two above ("remove in next release", :2139-2141); gone in 0.5.23. */
  spec_accepted_drafts?: number;
  spec_proposed_drafts?: number;
  /** 0.5.9 (:1865) and 0.5.12's alias (:2152-2155); 0.5.12 on: spec_correct_drafts_histogram. */
  spec_accept_histogram?: number[];
  spec_correct_drafts_histogram?: number[];
  [field: string]: unknown;
}

export interface GenerateResponse {
  text: string;
  output_ids?: number[];
  meta_info: MetaInfo;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
}

export interface ChatRequest {
  /** SGLang serves one model; "default" is sent when absent. */
  model?: string;
  messages: ChatMessage[];
  max_tokens?: number;
  temperature?: number;
  top_p?: number;
  stop?: string | string[];
  seed?: number;
  n?: number;
  /** SGLang extensions (top_k, ignore_eos, min_p, ...). */
  [field: string]: unknown;
}

export interface ChatChoice {
  index: number;
  message: { role: string; content: string | null; reasoning_content?: string | null; [field: string]: unknown };
  finish_reason: string | null;
  matched_stop?: number | string | null;
}

export interface ChatResponse {
  id: string;
  object: string;
  created: number;
  model: string;
  choices: ChatChoice[];
  usage?: { prompt_tokens: number; completion_tokens: number; total_tokens: number; [field: string]: unknown };
  [field: string]: unknown;
}

export interface ModelInfo {
  model_path: string;
  tokenizer_path?: string | null;
  is_generation: boolean;
  [field: string]: unknown;
}
