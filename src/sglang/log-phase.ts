/**
 * Reading an SGLang server log: how far startup got, why a server died, and which warnings
 * it printed. Pure functions over log text, so every rule is golden-tested against excerpts
 * shaped like SGLang's real output.
 *
 * SGLang's log format is `[YYYY-MM-DD HH:MM:SS<rank prefix>] message` with no level name
 * (a warning looks exactly like an info line), so lines are recognised by their message.
 */

export type ServerPhase =
  'starting' | 'loading weights' | 'weights loaded' | 'capturing cuda graphs' | 'warming up' | 'ready';

export const PHASE_ORDER: readonly ServerPhase[] = [
  'starting',
  'loading weights',
  'weights loaded',
  'capturing cuda graphs',
  'warming up',
  'ready',
];

/** Splits log text into lines; tqdm progress bars rewrite one line with \r, so \r splits too. */
export function logLines(text: string): string[] {
  return text.split(/\r\n|\r|\n/);
}

// `[2025-07-01 10:00:00] `, `[2025-07-01 10:00:00 TP0] `, `[2025-07-01 10:00:00 DP1 TP3 EP3] `,
// and the time-only `[10:00:00 TP0] ` some versions print.
const TIMESTAMP_PREFIX = /^\[(?:\d{4}-\d{2}-\d{2} )?\d{2}:\d{2}:\d{2}[^\]]*\]\s*/;
const UVICORN_LEVEL = /^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL):\s+/;

/** The message of a log line without SGLang's timestamp/rank prefix or uvicorn's level. */
export function stripLogPrefix(line: string): string {
  return line.replace(TIMESTAMP_PREFIX, '').replace(UVICORN_LEVEL, '').trim();
}

interface PhaseMarker {
  phase: ServerPhase;
  test: RegExp;
}

// Checked in order; the first match decides a line's phase.
const PHASE_MARKERS: PhaseMarker[] = [
  { phase: 'ready', test: /The server is fired up and ready to roll!/ },
  { phase: 'warming up', test: /Uvicorn running on|max_total_num_tokens=/ },
  { phase: 'capturing cuda graphs', test: /Capture (?:[\w-]+ )*cuda graph (?:begin|end)/i },
  { phase: 'weights loaded', test: /Load weight end\b|Memory pool end\b|KV Cache is allocated/ },
  { phase: 'loading weights', test: /Load weight begin\b/ },
];

// tqdm lines carry progress inside a phase: "Loading safetensors checkpoint shards:  50% Completed | 2/4 [...]",
// "Capturing batches (bs=1 avail_mem=2.91 GB): 100%|████| 4/4 [...]".
const PROGRESS: PhaseMarker[] = [
  { phase: 'loading weights', test: /^(Loading [\w ]*?(?:checkpoint shards|weights)[^:]*):\s*(\d+)%.*?(\d+\/\d+)/ },
  { phase: 'capturing cuda graphs', test: /^(Capturing batches[^:]*):\s*(\d+)%.*?(\d+\/\d+)/ },
];

function progressDetail(message: string): { phase: ServerPhase; detail: string } | undefined {
  for (const p of PROGRESS) {
    const m = p.test.exec(message);
    if (m) return { phase: p.phase, detail: `${m[1].trim()}: ${m[2]}% (${m[3]})` };
  }
  return undefined;
}

/**
 * The furthest startup phase the log shows, with the most recent line that belongs to it.
 * The furthest phase wins over the latest line because TP ranks interleave their lines
 * (rank 7 may log "Load weight begin" after rank 0 logged "Load weight end").
 */
export function readPhase(logText: string): { phase: ServerPhase; detail?: string } {
  let rank = 0;
  let detail: string | undefined;
  for (const line of logLines(logText)) {
    const message = stripLogPrefix(line);
    if (message.length === 0) continue;
    const marker = PHASE_MARKERS.find((m) => m.test.test(message));
    if (marker) {
      const r = PHASE_ORDER.indexOf(marker.phase);
      if (r > rank) {
        rank = r;
        detail = message;
      } else if (r === rank) {
        detail = message;
      }
      continue;
    }
    const progress = progressDetail(message);
    if (progress && PHASE_ORDER.indexOf(progress.phase) === rank) detail = progress.detail;
  }
  const phase = PHASE_ORDER[rank];
  return detail === undefined ? { phase } : { phase, detail };
}

export type ServerFailureKind = 'missing-module' | 'out-of-memory' | 'port-in-use' | 'warmup-failed' | 'crash';

export interface ServerFailure {
  kind: ServerFailureKind;
  /** false when relaunching the same command cannot help: the run must stop and say what to change. */
  retryable: boolean;
  message: string;
  /** The Python that ran the launcher, when the log names it (missing-module). */
  interpreter?: string;
}

// `/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')`
const MODULE_SPEC_ERROR =
  /^(\S*python[\w.-]*|\/\S+): Error while finding module specification for '([^']+)' \((?:ModuleNotFoundError|ImportError): (.+)\)\s*$/;
// `/usr/bin/python3: No module named sglang.launch_server`
const NO_MODULE_NAMED = /^(\S*python[\w.-]*|\/\S+): No module named ([\w.]+)\s*$/;
// The exception line of a traceback. "Ignore import error when loading ...: No module named 'x'"
// is SGLang skipping an optional model file, not a failure, and does not match this.
const TRACEBACK_MODULE_ERROR =
  /^(ModuleNotFoundError: No module named '([^']+)'.*|ImportError: cannot import name .*)$/;

const CUDA_OOM = /torch\.(?:cuda\.)?OutOfMemoryError|CUDA out of memory|CUDA error: out of memory/;
const KV_POOL_TOO_SMALL = /Not enough memory\. Please try to increase --mem-fraction-static/;
const UNBALANCED_MEMORY = /The memory capacity is unbalanced/;

const PORT_IN_USE = /\[Errno 98\]|address already in use/i;
const BIND_ADDRESS = /bind on address \(['"]?([^'",)]+)['"]?,\s*(\d+)\)/;

const WARMUP_FAILED = 'Initialization failed. warmup error:';
const TRACEBACK = 'Traceback (most recent call last):';

function findLine(lines: string[], test: RegExp): { line: string; match: RegExpExecArray } | undefined {
  for (let i = lines.length - 1; i >= 0; i--) {
    const message = stripLogPrefix(lines[i]);
    const match = test.exec(message);
    if (match) return { line: message, match };
  }
  return undefined;
}

/**
 * The exception line that ends the last traceback at or after `from`: the first line after
 * the header that is neither indented (frames, source, carets) nor empty.
 */
export function exceptionLine(lines: string[], from = 0): string | undefined {
  let start = -1;
  for (let i = lines.length - 1; i >= from; i--) {
    if (lines[i].includes(TRACEBACK)) {
      start = i;
      break;
    }
  }
  if (start === -1) return undefined;
  for (let i = start + 1; i < lines.length; i++) {
    const line = lines[i];
    if (line.trim().length === 0 || /^\s/.test(line)) continue;
    return stripLogPrefix(line);
  }
  return undefined;
}

function lastNonEmpty(lines: string[]): string | undefined {
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = stripLogPrefix(lines[i]);
    if (m.length > 0) return m;
  }
  return undefined;
}

function classifyMissingModule(lines: string[]): ServerFailure | undefined {
  const spec = findLine(lines, MODULE_SPEC_ERROR);
  if (spec) {
    const [, interpreter, target, cause] = spec.match;
    return {
      kind: 'missing-module',
      retryable: false,
      interpreter,
      message:
        `${interpreter} cannot run ${target} (${cause}): this Python has no SGLang. ` +
        `Set server.launcher to the Python of the environment where SGLang is installed, e.g. ["/path/to/venv/bin/python", "-m", "sglang.launch_server"].`,
    };
  }
  const named = findLine(lines, NO_MODULE_NAMED);
  if (named) {
    const [, interpreter, target] = named.match;
    return {
      kind: 'missing-module',
      retryable: false,
      interpreter,
      message:
        `${interpreter} has no module ${target}: this Python does not have SGLang (or an SGLang without that entry point). ` +
        `Set server.launcher to the Python of the environment where SGLang is installed.`,
    };
  }
  // Only the exception that ended the last traceback counts: an import error printed and
  // survived earlier (optional model files) is not why the server died.
  const final = exceptionLine(lines);
  if (final !== undefined && TRACEBACK_MODULE_ERROR.test(final)) {
    return {
      kind: 'missing-module',
      retryable: false,
      message:
        `the server's Python environment is incomplete: ${final}. ` +
        `Install the missing package, or point server.launcher at the environment SGLang was installed into.`,
    };
  }
  return undefined;
}

function classifyMemory(lines: string[]): ServerFailure | undefined {
  const kv = findLine(lines, KV_POOL_TOO_SMALL);
  if (kv) {
    return {
      kind: 'out-of-memory',
      retryable: false,
      message:
        `no GPU memory was left for the KV cache after loading the weights (${kv.line}). ` +
        `Raise --mem-fraction-static (server.mem-fraction-static) or --tp-size, and check for GPU processes that are not ours holding memory.`,
    };
  }
  const unbalanced = findLine(lines, UNBALANCED_MEMORY);
  if (unbalanced) {
    return {
      kind: 'out-of-memory',
      retryable: false,
      message:
        `free GPU memory differs between the GPUs (${unbalanced.line}): some GPUs are probably occupied by other processes. ` +
        `Check for foreign GPU processes (aerie reports them; it does not kill them).`,
    };
  }
  const oom = findLine(lines, CUDA_OOM);
  if (oom) {
    return {
      kind: 'out-of-memory',
      retryable: false,
      message:
        `the GPU ran out of memory (${oom.line}). Lower --mem-fraction-static (server.mem-fraction-static) to leave room for ` +
        `activations and CUDA graphs, or raise --tp-size, and check for GPU processes that are not ours holding memory.`,
    };
  }
  return undefined;
}

function classifyPort(lines: string[]): ServerFailure | undefined {
  const hit = findLine(lines, PORT_IN_USE);
  if (!hit) return undefined;
  const bind = BIND_ADDRESS.exec(hit.line);
  const where = bind ? `${bind[1]}:${bind[2]}` : 'the server port';
  return {
    kind: 'port-in-use',
    retryable: false,
    message:
      `${where} is already in use (${hit.line}): another process holds it, perhaps a server left from an earlier run. ` +
      `Stop that process or choose another server.port.`,
  };
}

function classifyWarmup(lines: string[]): ServerFailure | undefined {
  let at = -1;
  for (let i = lines.length - 1; i >= 0; i--) {
    if (lines[i].includes(WARMUP_FAILED)) {
      at = i;
      break;
    }
  }
  if (at === -1) return undefined;
  const cause = exceptionLine(lines, at) ?? stripLogPrefix(lines[at]).slice(WARMUP_FAILED.length).trim();
  const tail = lines.slice(at).join('\n');
  // The warmup request goes to the server's own URL; an HTTP proxy in the environment turns
  // it into a 502 from the proxy, every time.
  if (/ProxyError|Response \[502\]/.test(tail)) {
    return {
      kind: 'warmup-failed',
      retryable: false,
      message:
        `the server's own warmup request failed (${cause}); a 502 or proxy error usually means http_proxy/https_proxy ` +
        `is set for the server: add no_proxy=127.0.0.1,localhost to server.env.`,
    };
  }
  return {
    kind: 'warmup-failed',
    retryable: true,
    message: `the server loaded but its warmup generation failed: ${cause}`,
  };
}

/**
 * Why a server process died, from the tail of its log. Earlier causes are checked first: a
 * missing module explains everything after it, and an OOM usually ends in a traceback too.
 */
export function classifyServerFailure(logTail: string): ServerFailure {
  const lines = logLines(logTail);
  const known = classifyMissingModule(lines) ?? classifyMemory(lines) ?? classifyPort(lines) ?? classifyWarmup(lines);
  if (known) return known;
  const exception = exceptionLine(lines);
  if (exception) return { kind: 'crash', retryable: true, message: exception };
  const last = lastNonEmpty(lines);
  return {
    kind: 'crash',
    retryable: true,
    message: last
      ? `the server exited without a Python traceback; last log line: ${last}`
      : 'the server exited and its log is empty',
  };
}

/**
 * SGLang warnings that print without any level word (its format has none); the rest are
 * found by the WARNING / *Warning: words other libraries print.
 */
const KNOWN_WARNINGS: RegExp[] = [
  /Max running requests is reset to \d+/,
  /speculative_num_draft_tokens is adjusted to/,
  /Overlap scheduler is disabled/,
  /Spec v2 is enabled|Beta spec is enabled/,
  // Info lines that change what a benchmark measures: 0.5.12 falling back to spec v1
  // (sglang==0.5.12:srt/server_args.py:3765), 0.5.23's synchronous spec v2
  // (sglang==0.5.23:srt/arg_groups/speculative_hook.py:1100), mixed chunked prefill turned off
  // (sglang==0.5.4:srt/server_args.py:1308-1313, 0.5.23:srt/arg_groups/speculative_hook.py:1113-1118).
  /Spec v1 is used|Non-overlap \(synchronous\) spec v2|Mixed chunked prefill is disabled/,
  /DeepGEMM/,
  /is deprecated/,
];
const LEVEL_WORD = /\bWARNING\b|\b\w*Warning:/;

/** Warning lines, prefix stripped, each message once (every TP rank prints the same one). */
export function serverWarnings(logText: string): string[] {
  const seen = new Set<string>();
  const out: string[] = [];
  for (const line of logLines(logText)) {
    const message = stripLogPrefix(line);
    if (message.length === 0) continue;
    if (!LEVEL_WORD.test(line) && !KNOWN_WARNINGS.some((w) => w.test(message))) continue;
    if (seen.has(message)) continue;
    seen.add(message);
    out.push(message);
  }
  return out;
}

/** The last n lines of text (a trailing newline does not count as an empty last line). */
export function lastLines(text: string, n: number): string {
  if (n <= 0 || text.length === 0) return '';
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === '') lines.pop();
  return lines.slice(-n).join('\n');
}
