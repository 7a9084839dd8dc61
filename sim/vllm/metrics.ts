/**
 * GET /metrics in Prometheus text, as prometheus_client renders vLLM 0.32.0's registry
 * (test/fixtures/real/vllm-0.32.0/metrics-after.txt): each counter `X_total` is followed by its
 * own `X_created` gauge family; labels model_name (the first served name) and engine ("0")
 * (vllm==0.32.0:vllm/v1/metrics/loggers.py:499-505). The spec-decode counters exist only with a
 * speculative config (vllm==0.32.0:vllm/v1/spec_decode/metrics.py:176-280, loggers.py:473,508) and
 * count the simulated decode: one draft per verify step of a running request, num_speculative_tokens
 * draft tokens each, the accepted ones in total and by position. Reads never change them.
 */

/** prometheus_client's floatToGoString (prometheus_client/utils.py). */
export function goFloat(d: number): string {
  if (d === Infinity) return '+Inf';
  if (d === -Infinity) return '-Inf';
  if (Number.isNaN(d)) return 'NaN';
  let s = String(d);
  if (Number.isInteger(d) && !s.includes('e')) s = `${s}.0`;
  const dot = s.indexOf('.');
  if (d > 0 && dot > 6 && !s.includes('e')) {
    const mantissa = `${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/[0.]+$/, '');
    return `${mantissa}e+0${dot - 1}`;
  }
  return s;
}

export class SpecCounters {
  drafts = 0;
  draftTokens = 0;
  accepted = 0;
  perPos: number[];

  constructor(readonly numTokens: number) {
    this.perPos = new Array<number>(numTokens).fill(0);
  }

  /** One verify step that accepted `k` draft tokens. */
  step(k: number): void {
    this.drafts += 1;
    this.draftTokens += this.numTokens;
    this.accepted += k;
    for (let p = 0; p < k && p < this.numTokens; p++) this.perPos[p]! += 1;
  }
}

export interface MetricsState {
  modelName: string;
  createdAt: number;
  spec: SpecCounters | null;
  running: number;
  waiting: number;
  promptTokens: number;
  generationTokens: number;
  success: Record<'stop' | 'length' | 'abort' | 'error' | 'repetition', number>;
}

function labels(l: Record<string, string>): string {
  return `{${Object.entries(l)
    .map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`)
    .join(',')}}`;
}

export function renderMetrics(s: MetricsState, startTimeS: number): string {
  const out: string[] = [];
  const base = { engine: '0', model_name: s.modelName };
  const created = goFloat(s.createdAt);
  const gauge = (name: string, help: string, samples: [Record<string, string>, number][]) => {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    for (const [l, v] of samples) out.push(`${name}${labels(l)} ${goFloat(v)}`);
  };
  const counter = (name: string, help: string, samples: [Record<string, string>, number][]) => {
    out.push(`# HELP ${name}_total ${help}`, `# TYPE ${name}_total counter`);
    for (const [l, v] of samples) out.push(`${name}_total${labels(l)} ${goFloat(v)}`);
    out.push(`# HELP ${name}_created ${help}`, `# TYPE ${name}_created gauge`);
    for (const [l] of samples) out.push(`${name}_created${labels(l)} ${created}`);
  };
  out.push(
    '# HELP python_info Python platform information',
    '# TYPE python_info gauge',
    'python_info{implementation="CPython",major="3",minor="11",patchlevel="7",version="3.11.7"} 1.0',
    '# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.',
    '# TYPE process_start_time_seconds gauge',
    `process_start_time_seconds ${goFloat(startTimeS)}`,
  );
  if (s.spec) {
    const sp = s.spec;
    counter('vllm:spec_decode_num_drafts', 'Number of spec decoding drafts.', [[base, sp.drafts]]);
    counter('vllm:spec_decode_num_draft_tokens', 'Number of draft tokens.', [[base, sp.draftTokens]]);
    counter('vllm:spec_decode_num_accepted_tokens', 'Number of accepted tokens.', [[base, sp.accepted]]);
    counter(
      'vllm:spec_decode_num_accepted_tokens_per_pos',
      'Accepted tokens per draft position.',
      sp.perPos.map((v, p) => [{ ...base, position: String(p) }, v]),
    );
  }
  gauge('vllm:num_requests_running', 'Number of requests in model execution batches.', [[base, s.running]]);
  gauge('vllm:num_requests_waiting', 'Number of requests waiting to be processed.', [[base, s.waiting]]);
  counter('vllm:prompt_tokens', 'Number of prefill tokens processed.', [[base, s.promptTokens]]);
  counter('vllm:generation_tokens', 'Number of generation tokens processed.', [[base, s.generationTokens]]);
  counter(
    'vllm:request_success',
    'Count of successfully processed requests.',
    (['stop', 'length', 'abort', 'error', 'repetition'] as const).map((r) => [
      { engine: '0', finished_reason: r, model_name: s.modelName },
      s.success[r],
    ]),
  );
  return out.join('\n') + '\n';
}
