/**
 * Reading a vLLM server log: how far startup got, and which warnings it printed. Pure
 * functions over log text, golden-tested against the real logs in
 * test/fixtures/real/vllm-0.32.0/. Why a server died is read by the same traceback rules as
 * SGLang's (src/sglang/log-phase.ts classifyServerFailure): both are Python processes whose
 * last exception line names the cause; this file only strips vLLM's own line prefix first.
 *
 * vLLM's line format (vllm==0.32.0:vllm/logger.py): `LEVEL MM-DD HH:MM:SS [file.py:line] message`,
 * with `(APIServer pid=N) `, `(EngineCore pid=N) ` or `(Worker pid=N) ` before it, naming the process, and
 * uvicorn's own `INFO:     message` lines.
 */
import { classifyServerFailure, logLines, type ServerFailure, type ServerPhase } from '../../sglang/log-phase.js';

// `(APIServer pid=8109) `, `(EngineCore pid=8346) `, `(Worker pid=8860) `, `(VllmWorker-0 pid=8860) `.
const PREFIX =
  /^(?:\([\w.-]+ pid=\d+\)\s*)?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?\s+\[[^\]]*\]\s*|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+)/;

/** The message of a vLLM log line, its level, time, source and process prefix removed. */
export function stripVllmPrefix(line: string): string {
  return line.replace(PREFIX, '').trim();
}

interface Marker {
  phase: ServerPhase;
  test: RegExp;
}

// Checked in order; the first match decides a line's phase. Sources (vllm==0.32.0):
//  ready:            uvicorn's "Application startup complete." once the API server's app is up
//  warming up:       v1/engine/core.py:386-403 "init engine (profile, create kv cache, warmup model) took"
//                    and the KV cache sizing that precedes it
//  weights loaded:   v1/worker/gpu_model_runner.py:5150 "Model loading took"
//  loading weights:  "Starting to load model" (the model runner) and the loader's progress
const MARKERS: Marker[] = [
  { phase: 'ready', test: /^Application startup complete\.?/ },
  {
    phase: 'warming up',
    test: /init engine \(profile, create kv cache, warmup model\) took|GPU KV cache size|KV cache size:|Maximum concurrency for/i,
  },
  { phase: 'weights loaded', test: /Model loading took|Loading weights took/ },
  { phase: 'loading weights', test: /Starting to load model|Loading safetensors checkpoint shards/ },
];

const ORDER: readonly ServerPhase[] = [
  'starting',
  'loading weights',
  'weights loaded',
  'capturing cuda graphs',
  'warming up',
  'ready',
];

/** The furthest startup phase the log shows, with the latest line that belongs to it. */
export function readVllmPhase(logText: string): { phase: ServerPhase; detail?: string } {
  let rank = 0;
  let detail: string | undefined;
  for (const line of logLines(logText)) {
    const message = stripVllmPrefix(line);
    if (message.length === 0) continue;
    const marker = MARKERS.find((m) => m.test.test(message));
    if (!marker) continue;
    const r = ORDER.indexOf(marker.phase);
    if (r >= rank) {
      rank = r;
      detail = message;
    }
  }
  const phase = ORDER[rank]!;
  return detail === undefined ? { phase } : { phase, detail };
}

/** Why a vLLM server died: the same rules as SGLang's, over lines with vLLM's prefix removed. */
export function classifyVllmFailure(logTail: string): ServerFailure {
  return classifyServerFailure(logLines(logTail).map(stripVllmPrefix).join('\n'));
}

/** Warning lines, prefix stripped, each message once. */
export function vllmWarnings(logText: string): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const line of logLines(logText)) {
    if (!/(?:^|\)\s*)WARNING\s+\d{2}-\d{2}|^WARNING:|\b\w*Warning:/.test(line)) continue;
    const message = stripVllmPrefix(line);
    if (message.length === 0 || seen.has(message)) continue;
    seen.add(message);
    out.push(message);
  }
  return out;
}
