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
import {
  classifyServerFailure,
  logLines,
  PHASE_ORDER,
  type ServerFailure,
  type ServerPhase,
} from '../../sglang/log-phase.js';

// `(APIServer pid=8109) `, `(EngineCore pid=8346) `, `(Worker pid=8860) `, `(VllmWorker-0 pid=8860) `.
const PREFIX =
  /^(?:\([\w.-]+ pid=\d+\)\s*)?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}(?:\.\d+)?\s+\[[^\]]*\] ?|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+)/;

/** The message of a vLLM log line, its level, time, source and process prefix removed (indentation kept). */
export function stripVllmPrefix(line: string): string {
  return line.replace(PREFIX, '').trimEnd();
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

const ORDER = PHASE_ORDER;

/** The furthest startup phase the log shows, with the latest line that belongs to it. */
export function readVllmPhase(logText: string): { phase: ServerPhase; detail?: string } {
  let rank = 0;
  let detail: string | undefined;
  for (const line of logLines(logText)) {
    const message = stripVllmPrefix(line).trim();
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

/**
 * Wrappers vLLM raises on top of the real cause, in the API server and the engine-core
 * launcher (vllm==0.32.0:vllm/v1/engine/utils.py:1432, v1/engine/exceptions.py:12,
 * v1/executor/multiproc_executor.py): the cause is the exception printed before them.
 */
const WRAPPERS =
  /Engine core initialization failed|EngineDeadError|EngineCore encountered an issue|^SystemExit|^KeyboardInterrupt|^Exception in ASGI application/;
// An exception line: an unindented `pkg.Name(Error|Exception): text` (a traceback's last line).
const EXCEPTION = /^(?:[\w.]+\.)?\w*(?:Error|Exception)\b(?::\s.*)?$/;

/**
 * Why a vLLM server died. A missing module, a full GPU or a taken port read as SGLang's rules
 * read them (both are Python processes); otherwise the first exception that is not one of
 * vLLM's wrappers names the cause: the engine core and its workers print the real traceback,
 * then the API server wraps it ("Engine core initialization failed. See root cause above").
 * A pydantic ValidationError (an argument vLLM refuses) carries its reason on the next line.
 */
export function classifyVllmFailure(logTail: string): ServerFailure {
  const lines = logLines(logTail).map(stripVllmPrefix);
  const generic = classifyServerFailure(lines.join('\n'));
  if (generic.kind !== 'crash') return generic;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (!EXCEPTION.test(line) || WRAPPERS.test(line)) continue;
    const next = lines[i + 1]?.trim() ?? '';
    const message = /ValidationError/.test(line) && /^Value error,/.test(next) ? `${line} ${next}` : line;
    // vLLM refusing its arguments or a checkpoint (a ValidationError, a loader's ValueError) refuses
    // them again on a relaunch: ServerStartFailed, not another 1-minute load (d2t-full-vocab.log, eagle-method.log).
    const deterministic = /ValidationError|^ValueError/.test(line);
    return {
      kind: 'crash',
      retryable: !deterministic,
      message: message.length > 600 ? `${message.slice(0, 599)}…` : message,
    };
  }
  return generic;
}

/** Warning lines, prefix stripped, each message once. */
export function vllmWarnings(logText: string): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const line of logLines(logText)) {
    if (!/(?:^|\)\s*)WARNING\s+\d{2}-\d{2}|^WARNING:|\b\w*Warning:/.test(line)) continue;
    const message = stripVllmPrefix(line).trim();
    if (message.length === 0 || seen.has(message)) continue;
    seen.add(message);
    out.push(message);
  }
  return out;
}
