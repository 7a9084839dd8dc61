/**
 * sampling_params as SGLang's SamplingParams takes them: the same defaults, the same
 * checks and the same error wording, so a client bug shows up here as it would on a GPU.
 */

export interface SamplingParams {
  max_new_tokens: number | null;
  min_new_tokens: number;
  temperature: number;
  top_p: number;
  top_k: number;
  min_p: number;
  frequency_penalty: number;
  presence_penalty: number;
  repetition_penalty: number;
  stop: string[];
  stop_token_ids: number[];
  ignore_eos: boolean;
  skip_special_tokens: boolean;
  no_stop_trim: boolean;
  n: number;
  sampling_seed: number | null;
}

const DEFAULTS: SamplingParams = {
  max_new_tokens: 128,
  min_new_tokens: 0,
  temperature: 1.0,
  top_p: 1.0,
  top_k: -1,
  min_p: 0.0,
  frequency_penalty: 0.0,
  presence_penalty: 0.0,
  repetition_penalty: 1.0,
  stop: [],
  stop_token_ids: [],
  ignore_eos: false,
  skip_special_tokens: true,
  no_stop_trim: false,
  n: 1,
  sampling_seed: null,
};

/** Keys SamplingParams accepts but the simulator does not act on. */
const ACCEPTED_IGNORED = new Set([
  'json_schema',
  'regex',
  'ebnf',
  'structural_tag',
  'spaces_between_special_tokens',
  'custom_params',
  'stream_interval',
  'logit_bias',
  'sampling_seed',
]);

export class SamplingError extends Error {}

function num(v: unknown, key: string): number {
  if (typeof v !== 'number' || !Number.isFinite(v))
    throw new SamplingError(`${key} must be a number, got ${JSON.stringify(v)}.`);
  return v;
}

function int(v: unknown, key: string): number {
  const n = num(v, key);
  if (!Number.isInteger(n)) throw new SamplingError(`${key} must be an integer, got ${n}.`);
  return n;
}

/** Parse and verify one sampling_params object (null/undefined = all defaults). */
export function parseSamplingParams(
  raw: unknown,
  defaultMaxNewTokens: number | null = DEFAULTS.max_new_tokens,
): SamplingParams {
  const p: SamplingParams = { ...DEFAULTS, max_new_tokens: defaultMaxNewTokens, stop: [], stop_token_ids: [] };
  if (raw === undefined || raw === null) return p;
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new SamplingError('sampling_params must be an object.');
  for (const [key, v] of Object.entries(raw as Record<string, unknown>)) {
    if (v === null || v === undefined) continue;
    switch (key) {
      case 'max_new_tokens':
        p.max_new_tokens = int(v, key);
        break;
      case 'min_new_tokens':
        p.min_new_tokens = int(v, key);
        break;
      case 'temperature':
        p.temperature = num(v, key);
        break;
      case 'top_p':
        p.top_p = num(v, key);
        break;
      case 'top_k':
        p.top_k = int(v, key);
        break;
      case 'min_p':
        p.min_p = num(v, key);
        break;
      case 'frequency_penalty':
        p.frequency_penalty = num(v, key);
        break;
      case 'presence_penalty':
        p.presence_penalty = num(v, key);
        break;
      case 'repetition_penalty':
        p.repetition_penalty = num(v, key);
        break;
      case 'ignore_eos':
        p.ignore_eos = Boolean(v);
        break;
      case 'skip_special_tokens':
        p.skip_special_tokens = Boolean(v);
        break;
      case 'no_stop_trim':
        p.no_stop_trim = Boolean(v);
        break;
      case 'n':
        p.n = int(v, key);
        break;
      case 'stop':
        p.stop = typeof v === 'string' ? [v] : Array.isArray(v) ? v.map(String) : [];
        break;
      case 'stop_token_ids':
        if (!Array.isArray(v)) throw new SamplingError('stop_token_ids must be a list of integers.');
        p.stop_token_ids = v.map((x) => int(x, 'stop_token_ids'));
        break;
      default:
        if (key === 'sampling_seed') {
          p.sampling_seed = int(v, key);
          break;
        }
        if (!ACCEPTED_IGNORED.has(key)) {
          throw new SamplingError(`SamplingParams.__init__() got an unexpected keyword argument '${key}'`);
        }
    }
  }
  verify(p);
  return p;
}

/** The checks of SamplingParams.verify(), in its order and wording. */
function verify(p: SamplingParams): void {
  if (p.temperature < 0) throw new SamplingError(`temperature must be non-negative, got ${p.temperature}.`);
  if (!(p.top_p > 0 && p.top_p <= 1)) throw new SamplingError(`top_p must be in (0, 1], got ${p.top_p}.`);
  if (!(p.min_p >= 0 && p.min_p <= 1)) throw new SamplingError(`min_p must be in [0, 1], got ${p.min_p}.`);
  if (p.top_k < 1 && p.top_k !== -1)
    throw new SamplingError(`top_k must be -1 (disable), or at least 1, got ${p.top_k}.`);
  if (!(p.frequency_penalty >= -2 && p.frequency_penalty <= 2)) {
    throw new SamplingError(`frequency_penalty must be in [-2, 2], got ${p.frequency_penalty}.`);
  }
  if (!(p.presence_penalty >= -2 && p.presence_penalty <= 2)) {
    throw new SamplingError(`presence_penalty must be in [-2, 2], got ${p.presence_penalty}.`);
  }
  if (!(p.repetition_penalty > 0 && p.repetition_penalty <= 2)) {
    throw new SamplingError(`repetition_penalty must be in (0, 2], got ${p.repetition_penalty}.`);
  }
  if (p.min_new_tokens < 0)
    throw new SamplingError(`min_new_tokens must be in [0, max_new_tokens], got ${p.min_new_tokens}.`);
  if (p.max_new_tokens !== null) {
    if (p.max_new_tokens < 0) throw new SamplingError(`max_new_tokens must be at least 0, got ${p.max_new_tokens}.`);
    if (p.min_new_tokens > p.max_new_tokens) {
      throw new SamplingError(
        `min_new_tokens must be in [0, max_new_tokens(${p.max_new_tokens})], got ${p.min_new_tokens}.`,
      );
    }
  }
  if (p.n < 1) throw new SamplingError(`n must be at least 1, got ${p.n}.`);
}
