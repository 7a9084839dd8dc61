/**
 * A small in-process HTTP server a test scripts (a chat endpoint whose faults it controls, an
 * SGLang route's error body): on a free loopback port picked by the kernel, its request body
 * read whole before the handler sees it, closed with its connections after the file.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll } from 'vitest';

/** Called once the request's body is in; a rejected promise is left unhandled, so it fails the vitest run. */
export type FakeHandler = (body: string, res: ServerResponse, req: IncomingMessage) => unknown;

export interface FakeServer {
  server: Server;
  baseUrl: string;
  close(): Promise<void>;
}

export async function startFakeServer(handler: FakeHandler): Promise<FakeServer> {
  const server = createServer((req, res) => {
    let body = '';
    // Decoded as a stream, so a character split across chunks stays whole.
    req.setEncoding('utf8');
    req.on('data', (d: string) => (body += d));
    req.on('end', () => void handler(body, res, req));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    server,
    baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

/** The file's fake server, started in beforeAll and closed in afterAll; read `.baseUrl` inside a hook or test. */
export function useFakeServer(handler: FakeHandler): { readonly baseUrl: string } {
  let fake: FakeServer | undefined;
  beforeAll(async () => {
    fake = await startFakeServer(handler);
  });
  afterAll(async () => {
    await fake?.close();
  });
  return {
    get baseUrl() {
      if (!fake)
        throw new Error('useFakeServer(): the server is started in beforeAll; read baseUrl inside a hook or test');
      return fake.baseUrl;
    },
  };
}

/** Servers a test starts as it goes (one per case, scripted by it): each closed in afterAll (afterEach with `each`). */
export function useFakeServers(opts: { each?: boolean } = {}): { start(handler: FakeHandler): Promise<FakeServer> } {
  const started: FakeServer[] = [];
  (opts.each ? afterEach : afterAll)(async () => {
    await Promise.all(started.splice(0).map((s) => s.close()));
  });
  return {
    async start(handler) {
      const s = await startFakeServer(handler);
      started.push(s);
      return s;
    },
  };
}
