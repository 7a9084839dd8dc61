/**
 * HTTP to a server bound to <address>:<port> on an SSH host (127.0.0.1, or a container's own
 * address when the server runs in a separate network namespace): a local listener on
 * 127.0.0.1:<ephemeral> per remote port, each accepted socket piped through a direct-tcpip
 * channel of the host's connection. The local port outlives reconnects, so the base URL an
 * activity holds stays valid; a socket accepted while the link is down waits for it.
 */
import { createServer, type Server, type Socket } from 'node:net';
import type { SshLink } from './link.js';

export class PortForwards {
  private readonly servers = new Map<number, Promise<{ server: Server; port: number }>>();
  private readonly sockets = new Set<Socket>();
  private closed = false;

  constructor(
    private readonly link: SshLink,
    /** Where the SSH host reaches servers' ports (hosts.<name>.http-address). */
    private readonly address = '127.0.0.1',
  ) {}

  /** The local port forwarding to remotePort on the host (created on first use). */
  localPort(remotePort: number): Promise<number> {
    if (this.closed) return Promise.reject(new Error(`host ${this.link.hostName}: port forwards are closed`));
    let entry = this.servers.get(remotePort);
    if (!entry) {
      entry = this.listen(remotePort);
      this.servers.set(remotePort, entry);
      entry.catch(() => this.servers.delete(remotePort));
    }
    return entry.then((e) => e.port);
  }

  private listen(remotePort: number): Promise<{ server: Server; port: number }> {
    const server = createServer((socket) => this.accept(socket, remotePort));
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => {
        server.removeListener('error', reject);
        // The worker's event loop must not stay alive for an idle forward.
        server.unref();
        resolve({ server, port: (server.address() as { port: number }).port });
      });
    });
  }

  private accept(socket: Socket, remotePort: number): void {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    socket.pause();
    // Nothing listening on the host (or no link): reset, so the client sees a refused/dropped
    // connection, exactly what it would see on LocalHost while a server is still loading.
    const refuse = () => (socket.destroyed ? undefined : socket.resetAndDestroy());
    this.link
      .retrying(`forward to port ${remotePort}`, (conn) =>
        conn.forwardOut(remotePort, this.address).catch(async (err: unknown) => {
          throw await conn.lostOr(err);
        }),
      )
      .then((channel) => {
        if (socket.destroyed) {
          channel.close();
          return;
        }
        channel.on('error', () => undefined);
        channel.on('close', () => (socket.destroyed ? undefined : socket.end()));
        socket.on('close', () => channel.close());
        socket.pipe(channel).pipe(socket);
        socket.resume();
      }, refuse);
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const s of this.sockets) s.destroy();
    const entries = await Promise.allSettled(this.servers.values());
    this.servers.clear();
    await Promise.all(
      entries.map((e) =>
        e.status === 'fulfilled' ? new Promise<void>((r) => e.value.server.close(() => r())) : undefined,
      ),
    );
  }
}
