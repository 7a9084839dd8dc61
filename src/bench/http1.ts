// A minimal HTTP/1.1 client connection for the load generator's streams.
//
// node:http wraps every body chunk in a Readable stream (nextTick, buffering, events);
// at 250 streams × one SSE frame per decode step that bookkeeping cost more CPU than
// everything aerie does with the frames. This connection writes one POST and hands the
// de-chunked body bytes straight to a callback. One connection serves one request at a
// time and is reused (keep-alive) until the server closes it; a load-generator slot
// owns one, so there is no pool to contend for.
//
// Scope: what SGLang (uvicorn) and proxies in front of it send: a status line, headers,
// then a body framed by Transfer-Encoding: chunked, Content-Length, or connection close;
// 1xx interim responses are skipped. No redirects, no compression (none is requested).

import * as net from 'node:net';
import * as tls from 'node:tls';

export interface Http1Target {
  tls: boolean;
  hostname: string;
  port: number;
}

export interface ResponseHandlers {
  /** Status line and headers are in (header names lower-cased). */
  onHead(status: number, statusMessage: string, headers: Record<string, string>): void;
  /** De-chunked body bytes, in order. The Buffer may be a view: copy what is kept. */
  onBody(chunk: Buffer): void;
  /** The body is complete. */
  onEnd(): void;
  /** The exchange failed (connect, reset, timeout, malformed response). */
  onError(err: Http1Error): void;
}

const CRLF = Buffer.from('\r\n');

export type Http1ErrorKind = 'timeout' | 'closed' | 'socket' | 'protocol';

/** Why an exchange failed, and whether the response head had arrived by then. */
export class Http1Error extends Error {
  constructor(
    readonly kind: Http1ErrorKind,
    message: string,
    public afterHead = false,
  ) {
    super(message);
  }
}

function httpError(kind: Http1ErrorKind, message: string): Http1Error {
  return new Http1Error(kind, message);
}

/** The hex size at the start of a chunk-size line (extensions after ';' ignored); -1 when malformed. */
export function chunkSize(buf: Buffer, from: number, to: number): number {
  let size = 0;
  let digits = 0;
  for (let i = from; i < to; i++) {
    const c = buf[i]!;
    const v =
      c >= 0x30 && c <= 0x39 ? c - 0x30 : c >= 0x61 && c <= 0x66 ? c - 0x57 : c >= 0x41 && c <= 0x46 ? c - 0x37 : -1;
    if (v < 0) {
      if (c === 0x3b || c === 0x20 || c === 0x09) break;
      return -1;
    }
    size = size * 16 + v;
    digits++;
  }
  return digits > 0 && digits <= 12 ? size : -1;
}
const HEAD_END = Buffer.from('\r\n\r\n');
const MAX_HEAD_BYTES = 64 * 1024;

type BodyMode = 'chunked' | 'length' | 'close';
type State =
  'idle' | 'head' | 'chunk-size' | 'chunk-data' | 'chunk-data-end' | 'trailers' | 'length' | 'close' | 'dead';

export class Http1Connection {
  private socket: net.Socket | undefined;
  private state: State = 'idle';
  private handlers: ResponseHandlers | undefined;
  private pending: Buffer | undefined;
  private remaining = 0;
  private keepAlive = true;

  constructor(
    private readonly target: Http1Target,
    private readonly idleTimeoutMs: number,
  ) {}

  /** Send one request; exactly one of onEnd / onError follows. */
  request(
    method: string,
    path: string,
    headers: Record<string, string | number>,
    body: Buffer,
    handlers: ResponseHandlers,
  ): void {
    if (this.handlers) throw new Error('Http1Connection: a request is already in flight');
    this.handlers = handlers;
    this.state = 'head';
    this.pending = undefined;
    this.keepAlive = true;
    const host = this.target.hostname.includes(':') ? `[${this.target.hostname}]` : this.target.hostname;
    let head = `${method} ${path} HTTP/1.1\r\nHost: ${host}:${this.target.port}\r\nConnection: keep-alive\r\nContent-Length: ${body.length}\r\n`;
    for (const [k, v] of Object.entries(headers)) head += `${k}: ${v}\r\n`;
    const bytes = Buffer.concat([Buffer.from(head + '\r\n', 'latin1'), body]);
    const socket = this.socket && !this.socket.destroyed ? this.socket : this.connect();
    socket.write(bytes);
  }

  /** Drop the connection; an in-flight request gets no further callbacks. */
  destroy(): void {
    this.handlers = undefined;
    this.state = 'dead';
    this.socket?.destroy();
    this.socket = undefined;
  }

  private connect(): net.Socket {
    const { hostname, port } = this.target;
    const socket = this.target.tls
      ? tls.connect({ host: hostname, port, servername: net.isIP(hostname) ? undefined : hostname })
      : net.connect({ host: hostname, port });
    socket.setNoDelay(true);
    socket.setTimeout(this.idleTimeoutMs, () =>
      this.fail(socket, httpError('timeout', `no data for ${this.idleTimeoutMs} ms`)),
    );
    socket.on('data', (chunk: Buffer) => {
      if (socket === this.socket) this.feed(chunk);
    });
    socket.on('error', (err) => this.fail(socket, httpError('socket', err.message)));
    socket.on('close', () => {
      if (socket !== this.socket) return;
      if (this.handlers && this.state !== 'close')
        return this.fail(socket, httpError('closed', 'connection closed before the response ended'));
      this.socket = undefined;
      if (this.handlers) this.complete();
    });
    this.socket = socket;
    return socket;
  }

  private fail(socket: net.Socket, err: Http1Error): void {
    if (socket !== this.socket) return;
    err.afterHead = this.state !== 'head' && this.state !== 'idle';
    const h = this.handlers;
    this.handlers = undefined;
    this.state = 'dead';
    this.socket = undefined;
    socket.destroy();
    h?.onError(err);
  }

  private complete(): void {
    const h = this.handlers;
    this.handlers = undefined;
    this.state = 'idle';
    if (!this.keepAlive || (this.pending && this.pending.length > 0)) {
      // Bytes after the response, or a server that said close: start fresh next time.
      this.socket?.destroy();
      this.socket = undefined;
    }
    this.pending = undefined;
    h?.onEnd();
  }

  private feed(chunk: Buffer): void {
    const buf = this.pending && this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    this.pending = undefined;
    let at = 0;
    while (at < buf.length && this.handlers) {
      switch (this.state) {
        case 'head': {
          const end = buf.indexOf(HEAD_END, at);
          if (end < 0) {
            if (buf.length - at > MAX_HEAD_BYTES)
              return this.fail(this.socket!, httpError('protocol', 'response head too large'));
            this.pending = buf.subarray(at);
            return;
          }
          const head = buf.toString('latin1', at, end);
          at = end + HEAD_END.length;
          if (!this.onHead(head)) return;
          break;
        }
        case 'chunk-size': {
          const eol = buf.indexOf(CRLF, at);
          if (eol < 0) {
            this.pending = buf.subarray(at);
            return;
          }
          const size = chunkSize(buf, at, eol);
          at = eol + 2;
          if (size < 0) return this.fail(this.socket!, httpError('protocol', 'malformed chunk size'));
          if (size === 0) this.state = 'trailers';
          else {
            this.remaining = size;
            this.state = 'chunk-data';
          }
          break;
        }
        case 'chunk-data':
        case 'length': {
          const take = Math.min(this.remaining, buf.length - at);
          const piece = buf.subarray(at, at + take);
          at += take;
          this.remaining -= take;
          this.handlers.onBody(piece);
          if (this.remaining === 0) {
            if (this.state === 'length') {
              this.pending = at < buf.length ? buf.subarray(at) : undefined;
              return this.complete();
            }
            this.state = 'chunk-data-end';
          }
          break;
        }
        case 'chunk-data-end': {
          if (buf.length - at < 2) {
            this.pending = buf.subarray(at);
            return;
          }
          if (buf[at] !== 0x0d || buf[at + 1] !== 0x0a)
            return this.fail(this.socket!, httpError('protocol', 'malformed chunk end'));
          at += 2;
          this.state = 'chunk-size';
          break;
        }
        case 'trailers': {
          const eol = buf.indexOf(CRLF, at);
          if (eol < 0) {
            this.pending = buf.subarray(at);
            return;
          }
          const empty = eol === at;
          at = eol + 2;
          if (empty) {
            this.pending = at < buf.length ? buf.subarray(at) : undefined;
            return this.complete();
          }
          break;
        }
        case 'close':
          this.handlers.onBody(buf.subarray(at));
          return;
        default:
          // Bytes while no response is expected: the connection is out of step.
          return this.fail(this.socket!, httpError('protocol', 'unexpected bytes from the server'));
      }
    }
    if (at < buf.length && this.state !== 'idle' && this.handlers) this.pending = buf.subarray(at);
  }

  /** Parse the status line and headers; false when the exchange ended here. */
  private onHead(head: string): boolean {
    const lines = head.split('\r\n');
    const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(lines[0] ?? '');
    if (!m) {
      this.fail(this.socket!, httpError('protocol', `malformed status line: ${(lines[0] ?? '').slice(0, 100)}`));
      return false;
    }
    const status = Number(m[1]);
    if (status >= 100 && status < 200) return true; // interim response: the real head follows
    const headers: Record<string, string> = {};
    for (const line of lines.slice(1)) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    this.keepAlive = !/\bclose\b/i.test(headers.connection ?? '') && !lines[0]!.startsWith('HTTP/1.0');
    const mode: BodyMode = /\bchunked\b/i.test(headers['transfer-encoding'] ?? '')
      ? 'chunked'
      : headers['content-length'] !== undefined
        ? 'length'
        : 'close';
    this.handlers!.onHead(status, m[2] ?? '', headers);
    if (!this.handlers) return false;
    if (mode === 'chunked') this.state = 'chunk-size';
    else if (mode === 'length') {
      this.remaining = Number(headers['content-length']);
      if (!Number.isFinite(this.remaining) || this.remaining < 0) {
        this.fail(this.socket!, httpError('protocol', 'malformed content-length'));
        return false;
      }
      this.state = 'length';
      if (this.remaining === 0) {
        this.complete();
        return false;
      }
    } else {
      this.keepAlive = false;
      this.state = 'close';
    }
    return true;
  }
}
