// Which release's bench_serving aerie's own figures follow. bench_serving's chat
// backend changed what it times between the releases a researcher may pin, so "TTFT"
// means something different on 0.5.9 and 0.5.12; aerie follows the server's own
// release (its /server_info `version`) and writes down which rules it used.
//
// Checked releases and what their chat backend (sglang-oai-chat) does:
//   0.5.4   TTFT/ITL from chunks whose delta.content is non-empty; one ITL per chunk
//           (sglang==0.5.4:sglang/bench_serving.py:388-402; pooled as-is at :1634)
//   0.5.9   content only (sglang==0.5.9:sglang/bench_serving.py:458-472); with the server's
//           accept_length > 0 each chunk's gap is split over the chunk's retokenized tokens
//           (use_retokenized_itl, :2107-2137)
//   0.5.12  reasoning_content + content both count (sglang==0.5.12:sglang/bench_serving.py:480-496);
//           the split as 0.5.9 (:984-1014)
//   0.5.23  as 0.5.12, with vLLM's `reasoning` as an alias of reasoning_content
//           (sglang==0.5.23:sglang/benchmark/serving.py:149-155, used at :565-579; split at :1153-1183)
// A release between two checked ones follows the older checked one. /generate (backend
// sglang) is the same in all four: TTFT at the first non-empty text, each chunk's gap
// spread over its new completion_tokens (sglang==0.5.4:sglang/bench_serving.py:569-580,
// sglang==0.5.23:sglang/benchmark/serving.py:787-797).

export interface BenchServingRules {
  /** The release whose bench_serving these rules are read from (a checked one). */
  release: '0.5.4' | '0.5.9' | '0.5.12' | '0.5.23';
  /** The server's own version, or undefined when it did not say. */
  serverVersion: string | undefined;
  /** Chat: reasoning deltas count as text for TTFT and ITL (0.5.12+); else content only. */
  chatReasoningIsText: boolean;
  /** Chat: with speculation (accept_length > 0) a chunk's gap is split over its tokens (0.5.9+); else one ITL per chunk. */
  chatSplitsSpeculativeChunks: boolean;
}

const CHECKED = ['0.5.4', '0.5.9', '0.5.12', '0.5.23'] as const;

/** When the server does not say its version: the newest checked release (the simulator's default too). */
export const DEFAULT_RULES_RELEASE = '0.5.23';

export function benchServingRules(serverVersion?: string): BenchServingRules {
  const v = parse(serverVersion);
  let release: BenchServingRules['release'] = DEFAULT_RULES_RELEASE;
  if (v) {
    release = CHECKED[0];
    for (const c of CHECKED) if (compare(v, parse(c)!) >= 0) release = c;
  }
  const at = (c: string): boolean => compare(parse(release)!, parse(c)!) >= 0;
  return {
    release,
    serverVersion: v ? serverVersion : undefined,
    chatReasoningIsText: at('0.5.12'),
    chatSplitsSpeculativeChunks: at('0.5.9'),
  };
}

/** For the record and the report: which rules, and how the release was known. */
export function rulesLabel(r: BenchServingRules): string {
  return r.serverVersion
    ? `bench_serving ${r.release} (server reports sglang ${r.serverVersion})`
    : `bench_serving ${r.release} (assumed: the server did not report its version)`;
}

/** The release from /server_info (sglang==0.5.4:srt/entrypoints/http_server.py:506, sglang==0.5.23:srt/entrypoints/http_server.py:888). */
export function serverVersionOf(info: Record<string, unknown> | undefined): string | undefined {
  const v = info?.version;
  return typeof v === 'string' && parse(v) ? v : undefined;
}

function parse(v: string | undefined): number[] | undefined {
  const m = v === undefined ? null : /^(\d+)\.(\d+)\.(\d+)/.exec(v);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
}

function compare(a: number[], b: number[]): number {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return 0;
}
