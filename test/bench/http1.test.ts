import * as net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { chunkSize, Http1Connection, type Http1Error } from '../../src/bench/http1.js';

// A raw TCP server that answers each request with bytes chosen by the test, split into
// pieces, so every framing the client must handle is produced exactly.

const servers: net.Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((r) => s.close(() => r()));
});

async function rawServer(
  answer: (request: string, socket: net.Socket, n: number) => void,
): Promise<{ port: number; sockets: () => number }> {
  let sockets = 0;
  let n = 0;
  // harness-exception: the HTTP/1 client's parser is tested on exact raw bytes split at chosen points (bad framing, 100 Continue, mid-body drops), which node:http behind startFakeServer would normalise or refuse
  const server = net.createServer((socket) => {
    sockets++;
    let buf = '';
    socket.on('data', (d) => {
      buf += d.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/content-length: (\d+)/i.exec(buf)?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      const req = buf.slice(0, end + 4 + len);
      buf = buf.slice(end + 4 + len);
      answer(req, socket, n++);
    });
    socket.on('error', () => undefined);
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { port: (server.address() as net.AddressInfo).port, sockets: () => sockets };
}

interface Outcome {
  status?: number;
  message?: string;
  body: string;
  error?: Http1Error;
}

function exchange(conn: Http1Connection, body = '{"x":1}'): Promise<Outcome> {
  return new Promise((resolve) => {
    const o: Outcome = { body: '' };
    conn.request('POST', '/generate', { 'Content-Type': 'application/json' }, Buffer.from(body), {
      onHead: (status, message) => Object.assign(o, { status, message }),
      onBody: (chunk) => (o.body += chunk.toString('utf8')),
      onEnd: () => resolve(o),
      onError: (error) => resolve({ ...o, error }),
    });
  });
}

/** Write pieces with a pause between them, so the client sees them as separate reads. */
async function dribble(socket: net.Socket, pieces: string[]): Promise<void> {
  for (const p of pieces) {
    socket.write(p);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('Http1Connection', () => {
  it('decodes a chunked body split anywhere, with chunk extensions and trailers, and reuses the connection', async () => {
    const srv = await rawServer((req, socket) => {
      expect(req).toMatch(
        /^POST \/generate HTTP\/1\.1\r\nHost: 127\.0\.0\.1:\d+\r\nConnection: keep-alive\r\nContent-Length: 7\r\nContent-Type: application\/json\r\n\r\n\{"x":1\}$/,
      );
      const wire =
        'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n' +
        'f;ext=1\r\ndata: {"a":1}\n\n\r\n' +
        'E\r\ndata: [DONE]\n\n\r\n' +
        '0\r\nX-Trailer: y\r\n\r\n';
      void dribble(socket, [
        wire.slice(0, 30),
        wire.slice(30, 71),
        wire.slice(71, 72),
        wire.slice(72, 101),
        wire.slice(101),
      ]);
    });
    const conn = new Http1Connection({ tls: false, hostname: '127.0.0.1', port: srv.port }, 5000);
    try {
      for (let i = 0; i < 2; i++) {
        const o = await exchange(conn);
        expect(o).toEqual({ status: 200, message: 'OK', body: 'data: {"a":1}\n\ndata: [DONE]\n\n' });
      }
      expect(srv.sockets()).toBe(1);
    } finally {
      conn.destroy();
    }
  });

  it('reads Content-Length and close-delimited bodies, skips a 100 Continue, and reconnects after Connection: close', async () => {
    const srv = await rawServer((_req, socket, n) => {
      if (n === 0)
        socket.write(
          'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom',
        );
      else if (n === 1) socket.end('HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil close');
      else socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n');
    });
    const conn = new Http1Connection({ tls: false, hostname: '127.0.0.1', port: srv.port }, 5000);
    try {
      expect(await exchange(conn)).toEqual({ status: 500, message: 'Internal Server Error', body: 'boom' });
      expect(await exchange(conn)).toEqual({ status: 200, message: 'OK', body: 'until close' });
      expect(await exchange(conn)).toEqual({ status: 200, message: 'OK', body: '' });
      expect(srv.sockets()).toBe(2);
    } finally {
      conn.destroy();
    }
  });

  it('reports a dropped connection, a malformed chunk and a silent server as errors of their kind', async () => {
    const srv = await rawServer((_req, socket, n) => {
      if (n === 0) {
        socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
        setTimeout(() => socket.destroy(), 20);
      } else if (n === 1) socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n');
      // n === 2: never answers
    });
    const conn = new Http1Connection({ tls: false, hostname: '127.0.0.1', port: srv.port }, 300);
    try {
      const dropped = await exchange(conn);
      expect(dropped.body).toBe('hello');
      expect(dropped.error?.kind).toBe('closed');
      expect(dropped.error?.afterHead).toBe(true);
      expect((await exchange(conn)).error?.kind).toBe('protocol');
      const silent = await exchange(conn);
      expect(silent.error?.kind).toBe('timeout');
      expect(silent.error?.afterHead).toBe(false);
    } finally {
      conn.destroy();
    }
  });

  it('reports a refused connection as a socket error before any response', async () => {
    const srv = await rawServer(() => undefined);
    const port = srv.port;
    await new Promise<void>((r) => servers.pop()!.close(() => r()));
    const conn = new Http1Connection({ tls: false, hostname: '127.0.0.1', port }, 1000);
    const o = await exchange(conn);
    expect(o.error?.kind).toBe('socket');
    expect(o.error?.message).toMatch(/ECONNREFUSED/);
  });

  it('parses chunk sizes strictly', () => {
    const size = (s: string) => chunkSize(Buffer.from(s), 0, s.length);
    expect(size('1A')).toBe(26);
    expect(size('ff;name=value')).toBe(255);
    expect(size('0')).toBe(0);
    expect(size('')).toBe(-1);
    expect(size('-1')).toBe(-1);
    expect(size('g')).toBe(-1);
  });
});
