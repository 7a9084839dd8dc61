/**
 * SGLang-shaped log output. Python's logging (SGLang, uvicorn's server messages, tqdm,
 * tracebacks) writes to stderr; uvicorn's access log writes to stdout. Lines carry SGLang's
 * `[YYYY-MM-DD HH:MM:SS]` / `[... TP0]` prefixes so log-phase parsers see the real shapes.
 */

const LEVELS: Record<string, number> = { debug: 10, info: 20, warning: 30, warn: 30, error: 40, critical: 50 };

export function levelValue(name: string | null | undefined): number {
  return LEVELS[(name ?? 'info').toLowerCase()] ?? 20;
}

const pad = (n: number) => String(n).padStart(2, '0');

export function timestamp(d = new Date()): string {
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

const STATUS_PHRASE: Record<number, string> = {
  200: 'OK',
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  405: 'Method Not Allowed',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export interface LogSink {
  out(line: string): void;
  err(line: string): void;
}

export const processSink: LogSink = {
  out: (line) => process.stdout.write(line + '\n'),
  err: (line) => process.stderr.write(line + '\n'),
};

export class SimLog {
  private readonly level: number;
  private readonly httpLevel: number;

  constructor(
    level: string,
    httpLevel: string | null,
    private readonly sink: LogSink = processSink,
  ) {
    this.level = levelValue(level);
    this.httpLevel = levelValue(httpLevel ?? level);
  }

  /** `[ts]` or `[ts TPn]`, the prefix of an SGLang log line. */
  stamp(rank?: number): string {
    return rank === undefined ? `[${timestamp()}]` : `[${timestamp()} TP${rank}]`;
  }

  info(msg: string, rank?: number): void {
    if (this.level <= 20) this.sink.err(`${this.stamp(rank)} ${msg}`);
  }

  warning(msg: string, rank?: number): void {
    if (this.level <= 30) this.sink.err(`${this.stamp(rank)} ${msg}`);
  }

  error(msg: string, rank?: number): void {
    this.sink.err(`${this.stamp(rank)} ${msg}`);
  }

  /** The same message from every TP rank, as a multi-GPU launch prints it. */
  infoAllRanks(tp: number, msg: string): void {
    for (let r = 0; r < tp; r++) this.info(msg, r);
  }

  /** uvicorn's own messages: `INFO:     Uvicorn running on ...`. */
  uvicorn(msg: string): void {
    if (this.httpLevel <= 20) this.sink.err(`${this.stamp()} INFO:     ${msg}`);
  }

  access(client: string, method: string, path: string, status: number): void {
    if (this.httpLevel > 20) return;
    this.sink.out(
      `${this.stamp()} INFO:     ${client} - "${method} ${path} HTTP/1.1" ${status} ${STATUS_PHRASE[status] ?? ''}`.trimEnd(),
    );
  }

  /** Unprefixed text (tqdm bars, tracebacks, the interpreter's own errors). */
  raw(text: string): void {
    this.sink.err(text);
  }
}
