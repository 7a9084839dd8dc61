/**
 * Stock SGLang 0.5.23's hidden states over HTTP (`return_hidden_states` on /generate), from the
 * simulated model's states (capture.ts HiddenStates), so a stock-path client can be run against
 * the simulator as against a GPU server. py/aerie_hs/CAPTURE.md "Stock path" has the sources.
 */
import type { HiddenStates } from './capture.js';
import { bf16ToF32, f32ToBf16 } from './weights.js';

export type HsMode = 'last' | 'full' | null;
const RANK = { null: 0, last: 1, full: 2 } as const;

/**
 * The server's mode: --return-hidden-states-mode, else full when --enable-return-hidden-states
 * or --enable-return-aux-hidden-states is set (sglang==0.5.23:sglang/srt/arg_groups/serving_hook.py:712-727).
 */
export function serverHsMode(args: Record<string, unknown>): HsMode {
  const m = args.return_hidden_states_mode as string | null | undefined;
  if (m === 'last' || m === 'full') return m;
  return args.enable_return_hidden_states || args.enable_return_aux_hidden_states ? 'full' : null;
}

/** A request's mode (sglang==0.5.23:sglang/srt/managers/schedule_batch.py:183-205); a string error for a bad value. */
export function requestHsMode(v: unknown): HsMode | string {
  const one = (x: unknown): HsMode | string => {
    if (x === true) return 'full';
    if (x === 'last') return 'last';
    if (x === false || x === undefined || x === null) return null;
    return "return_hidden_states must be a boolean or the string literal 'last'.";
  };
  if (!Array.isArray(v)) return one(v);
  let best: HsMode = null;
  for (const x of v) {
    const m = one(x);
    if (m !== null && m !== 'last' && m !== 'full') return m;
    if (RANK[String(m) as keyof typeof RANK] > RANK[String(best) as keyof typeof RANK]) best = m;
  }
  return best;
}

/** The TokenizerManager's refusal, or null (sglang==0.5.23:sglang/srt/managers/tokenizer_manager.py:1394-1410). */
export function hsRequestProblem(requested: HsMode, server: HsMode, serverSetting: unknown): string | null {
  if (RANK[String(requested) as keyof typeof RANK] <= RANK[String(server) as keyof typeof RANK]) return null;
  if (server !== null) {
    return (
      `The requested return_hidden_states mode exceeds the server maximum \`${serverSetting ?? server}\`. ` +
      'Please launch with `--return-hidden-states-mode full` to allow return_hidden_states=True.'
    );
  }
  return (
    'The server is not configured to return hidden states. Please set `--return-hidden-states-mode last`, ' +
    '`--return-hidden-states-mode full`, or the legacy `--enable-return-hidden-states` flag.'
  );
}

/** Rows as `.cpu().tolist()` gives them: each value the server dtype's (bf16) value as a float. */
function rows(values: Float32Array, width: number, from: number, to: number): number[][] {
  const out: number[][] = [];
  for (let t = from; t < to; t++) {
    const r = new Array<number>(width);
    for (let i = 0; i < width; i++) r[i] = bf16ToF32(f32ToBf16(values[t * width + i]));
    out.push(r);
  }
  return out;
}

/**
 * meta_info.hidden_states for a finished request: with mode full, the prefill appends one list of
 * its T rows and each decode step extends with the rows of the tokens it took in
 * (scheduler_components/batch_result_processor.py:641-700), so [[T rows], row, row, ...]; with
 * mode last, the last processed position's row alone. The rows are the aux concatenation [3H]
 * when the server captures aux states (they replace the final state: layers/logits_processor.py:853-872),
 * else the final post-norm state [H].
 */
export function hiddenStatesMeta(
  states: HiddenStates,
  aux: boolean,
  prompt: readonly number[],
  outputs: readonly number[],
  mode: HsMode,
  prefill: { cached: number; chunk: number },
): unknown {
  const seen = [...prompt, ...outputs.slice(0, Math.max(0, outputs.length - 1))];
  const final = states.final(seen);
  const values = aux ? states.aux(seen, final) : final;
  const width = aux ? states.hidden * states.capture.length : states.hidden;
  if (mode === 'last') return [rows(values, width, seen.length - 1, seen.length)[0]];
  // Only the extend part is stored, so a radix-cached prefix has no rows; with chunked prefill
  // only the last chunk commits its rows (batch_result_processor.py:308-312,335): hence the stock
  // path's --disable-radix-cache --chunked-prefill-size -1.
  const extend = prompt.length - prefill.cached;
  const lastChunk =
    prefill.chunk > 0 && extend > prefill.chunk ? Math.floor((extend - 1) / prefill.chunk) * prefill.chunk : 0;
  return [
    rows(values, width, prefill.cached + lastChunk, prompt.length),
    ...rows(values, width, prompt.length, seen.length),
  ];
}
