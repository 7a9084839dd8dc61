/**
 * vLLM's speculative-decoding counters from its Prometheus /metrics, and the accept length over
 * a window as the difference of two reads. Pure functions over the exposition text, so they are
 * golden-tested against the real server's output (test/fixtures/real/vllm-0.32.0/metrics-*.txt).
 *
 * Counters (shared/reference/vllm.md; vllm==0.32.0:vllm/v1/spec_decode/metrics.py):
 *   vllm:spec_decode_num_drafts_total           one per verify step that carried a draft
 *   vllm:spec_decode_num_draft_tokens_total     tokens proposed
 *   vllm:spec_decode_num_accepted_tokens_total  tokens accepted
 *   vllm:spec_decode_num_accepted_tokens_per_pos_total{position="k"}
 * They are cumulative for the life of the server and carry labels (model_name, engine); aerie
 * sums over every series of a name, so one engine or several read the same.
 *
 * Accept length over a window = 1 + Δaccepted / Δdrafts: each verify step yields the accepted
 * draft tokens plus the one token the target itself produces. It is SGLang's
 * avg_spec_accept_length in the same units, so the gate's threshold means the same on both.
 */

export interface SpecCounters {
  drafts: number;
  draftTokens: number;
  accepted: number;
  /** Accepted tokens by draft position (0 = first proposed token). */
  perPosition: number[];
}

const NAMES = {
  drafts: 'vllm:spec_decode_num_drafts_total',
  draftTokens: 'vllm:spec_decode_num_draft_tokens_total',
  accepted: 'vllm:spec_decode_num_accepted_tokens_total',
  perPosition: 'vllm:spec_decode_num_accepted_tokens_per_pos_total',
} as const;

/** One sample line: `name{labels} value [timestamp]`. Comments and blank lines are skipped. */
function parseSample(line: string): { name: string; labels: Record<string, string>; value: number } | undefined {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
  if (!m) return undefined;
  const labels: Record<string, string> = {};
  if (m[3]) for (const l of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
  const value = Number(m[4]);
  if (!Number.isFinite(value)) return undefined;
  return { name: m[1]!, labels, value };
}

/**
 * The spec-decode counters summed over every series, or undefined when the server exports none
 * (a server without speculative decoding: vLLM registers them only with a speculative config).
 */
export function specCounters(metricsText: string): SpecCounters | undefined {
  const sums = { drafts: 0, draftTokens: 0, accepted: 0 };
  const seen = { drafts: false, draftTokens: false, accepted: false };
  const perPosition: number[] = [];
  for (const raw of metricsText.split('\n')) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const s = parseSample(line);
    if (!s) continue;
    if (s.name === NAMES.perPosition) {
      const pos = Number(s.labels.position);
      if (Number.isInteger(pos) && pos >= 0) perPosition[pos] = (perPosition[pos] ?? 0) + s.value;
      continue;
    }
    for (const k of ['drafts', 'draftTokens', 'accepted'] as const) {
      if (s.name === NAMES[k]) {
        sums[k] += s.value;
        seen[k] = true;
      }
    }
  }
  if (!seen.drafts || !seen.accepted) return undefined;
  return { ...sums, perPosition: Array.from(perPosition, (v) => v ?? 0) };
}

/** What happened between two reads of the counters. */
export function counterDelta(before: SpecCounters, after: SpecCounters): SpecCounters {
  const n = Math.max(before.perPosition.length, after.perPosition.length);
  return {
    drafts: after.drafts - before.drafts,
    draftTokens: after.draftTokens - before.draftTokens,
    accepted: after.accepted - before.accepted,
    perPosition: Array.from({ length: n }, (_, i) => (after.perPosition[i] ?? 0) - (before.perPosition[i] ?? 0)),
  };
}

/**
 * Accept length over a window (1 + accepted per draft), or undefined when no draft was made in
 * it. A negative delta means the counters were reset (the server restarted between the reads):
 * that window measures nothing, and the caller says so rather than reporting a number.
 */
export function windowAcceptLength(d: SpecCounters): number | undefined {
  if (d.drafts < 0 || d.accepted < 0) return undefined;
  if (d.drafts === 0) return undefined;
  return 1 + d.accepted / d.drafts;
}

/** Per-position acceptance rates over a window (accepted at position k / drafts). */
export function positionRates(d: SpecCounters): number[] {
  return d.drafts > 0 ? d.perPosition.map((a) => a / d.drafts) : [];
}
