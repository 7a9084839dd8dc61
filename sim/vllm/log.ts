/**
 * vLLM-shaped log output. vLLM's logger (vllm==0.32.0:vllm/logger.py) writes
 * `(<Proc> pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message` to stdout, one line per call;
 * uvicorn writes `INFO:     message` (its server messages to stderr, its access log to stdout:
 * uvicorn==0.55.0:uvicorn/config.py LOGGING_CONFIG); tracebacks of the main process go to
 * stderr unprefixed. Shapes as in test/fixtures/real/vllm-0.32.0/serve.log.
 *
 * The simulator is one process; the EngineCore and Worker prefixes carry pids of their own
 * (the API server's + 1 and + 2), as the real log names three processes.
 */
import { type LogSink, processSink } from '../sglang/log.js';

export type Proc = 'APIServer' | 'EngineCore' | 'Worker';
type Level = 'INFO' | 'WARNING' | 'ERROR' | 'DEBUG';

const pad = (n: number) => String(n).padStart(2, '0');

function stamp(d = new Date()): string {
  return `${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

const PHRASE: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  404: 'Not Found',
  405: 'Method Not Allowed',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export class VllmLog {
  readonly pids: Record<Proc, number>;

  constructor(
    private readonly opts: { accessLog: boolean; sink?: LogSink } = { accessLog: true },
    pid = process.pid,
  ) {
    this.pids = { APIServer: pid, EngineCore: pid + 1, Worker: pid + 2 };
  }

  private get sink(): LogSink {
    return this.opts.sink ?? processSink;
  }

  prefix(proc: Proc, level: Level, source: string): string {
    return `(${proc} pid=${this.pids[proc]}) ${level} ${stamp()} [${source}] `;
  }

  line(proc: Proc, level: Level, source: string, msg: string): void {
    this.sink.out(`${this.prefix(proc, level, source)}${msg}`);
  }

  info(proc: Proc, source: string, msg: string): void {
    this.line(proc, 'INFO', source, msg);
  }

  warning(proc: Proc, source: string, msg: string): void {
    this.line(proc, 'WARNING', source, msg);
  }

  /** A multi-line message (a logged traceback): every line carries the prefix, as vLLM's formatter does. */
  error(proc: Proc, source: string, text: string): void {
    for (const l of text.split('\n')) this.line(proc, 'ERROR', source, l);
  }

  /** uvicorn's own messages (stderr). */
  uvicorn(msg: string): void {
    this.sink.err(`INFO:     ${msg}`);
  }

  access(client: string, method: string, path: string, status: number): void {
    if (!this.opts.accessLog) return;
    this.sink.out(`INFO:     ${client} - "${method} ${path} HTTP/1.1" ${status} ${PHRASE[status] ?? ''}`.trimEnd());
  }

  /** Unprefixed text on stderr: tqdm bars, the interpreter's own tracebacks and warnings. */
  raw(text: string): void {
    this.sink.err(text);
  }
}
