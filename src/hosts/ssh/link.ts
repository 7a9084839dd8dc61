/**
 * The one SSH connection a worker keeps per host: opened on first use, kept alive, and
 * reopened after a drop. `retrying` runs an idempotent operation and, when the connection
 * is lost under it, reconnects and runs it again (within a budget), so an activity in
 * progress does not notice a dropped link.
 */
import type { Client, ClientChannel, SFTPWrapper } from 'ssh2';
import { connectEndpoint, SshConnectError, SshTrustError, type ConnectTuning, type VerifiedKey } from './connect.js';
import type { SshEndpoint } from './options.js';
import { DEFAULT_OUTPUT_CAP, TailBuffer } from '../util/index.js';

/** The connection went away under an operation; an idempotent operation may simply run again. */
export class ConnectionLostError extends Error {
  override readonly name = 'ConnectionLostError';
}

export interface LinkTuning extends ConnectTuning {
  /** How long one operation keeps reconnecting before it gives up. */
  retryBudgetMs: number;
  /**
   * Session channels (exec, sftp) open at once. OpenSSH refuses more than MaxSessions
   * (default 10) per connection; port forwards do not count.
   */
  maxSessions: number;
}

export const DEFAULT_LINK_TUNING: LinkTuning = {
  strict: 'yes',
  keepaliveIntervalMs: 5_000,
  keepaliveCountMax: 3,
  readyTimeoutMs: 20_000,
  retryBudgetMs: 90_000,
  maxSessions: 8,
};

export interface RunResult {
  code: number | null;
  signal: string | null;
  stdout: Buffer;
  stderr: string;
}

export interface RunOptions {
  stdin?: string | Buffer;
  /** Keep only the last cap bytes of stdout (default: all of it). */
  stdoutCap?: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A counting semaphore: session channels beyond the server's limit wait their turn. */
class Slots {
  private used = 0;
  private readonly waiting: (() => void)[] = [];
  constructor(private readonly size: number) {}
  async take(): Promise<() => void> {
    if (this.used >= this.size) await new Promise<void>((r) => this.waiting.push(r));
    else this.used++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const next = this.waiting.shift();
      if (next) next();
      else this.used--;
    };
  }
}

/** One live connection (and its jump hosts). */
export class Conn {
  closed = false;
  readonly whenClosed: Promise<void>;
  private sftpSession: Promise<SFTPWrapper> | null = null;
  private readonly slots: Slots;
  private readonly closeWatchers = new Set<() => void>();

  constructor(
    readonly client: Client,
    private readonly jumps: Client[],
    readonly keys: VerifiedKey[],
    maxSessions: number,
  ) {
    this.slots = new Slots(Math.max(1, maxSessions - 1)); // one session is the SFTP subsystem
    this.whenClosed = new Promise<void>((resolve) => {
      const done = () => {
        if (this.closed) return;
        this.closed = true;
        for (const j of this.jumps) j.end();
        for (const w of [...this.closeWatchers]) w();
        this.closeWatchers.clear();
        resolve();
      };
      client.on('close', done);
      client.on('end', done);
      // Errors (keepalive timeout, reset) are followed by 'close'; a listener keeps them from being thrown.
      client.on('error', () => undefined);
      for (const j of jumps) {
        j.on('error', () => undefined);
        j.on('close', () => client.end());
      }
    });
  }

  /**
   * Call fn when the connection closes (at once if it has); returns the unsubscribe. A set,
   * not a promise reaction: an operation that ends first leaves nothing behind on a
   * connection that may serve millions of them.
   */
  watchClose(fn: () => void): () => void {
    if (this.closed) {
      fn();
      return () => undefined;
    }
    this.closeWatchers.add(fn);
    return () => this.closeWatchers.delete(fn);
  }

  /** Close now (after a lost operation, so the next one reconnects instead of reusing a dying link). */
  destroy(): void {
    if (this.closed) return;
    this.client.end();
    (this.client as unknown as { _sock?: { destroy?: () => void } })._sock?.destroy?.();
  }

  /** An error seen while the connection is going down is a lost connection, not a real failure. */
  async lostOr(err: unknown): Promise<unknown> {
    if (!this.closed) await Promise.race([this.whenClosed, sleep(300)]);
    if (this.closed) return new ConnectionLostError(`connection lost: ${(err as Error)?.message ?? String(err)}`);
    return err;
  }

  /** Run one command line in a session channel; stdout as bytes, stderr as text (last 4 MiB). */
  async run(command: string, opts: RunOptions = {}): Promise<RunResult> {
    if (this.closed) throw new ConnectionLostError('connection closed');
    const release = await this.slots.take();
    try {
      const channel = await new Promise<ClientChannel>((resolve, reject) => {
        this.client.exec(command, (err, ch) => (err ? reject(err) : resolve(ch)));
      }).catch(async (err: unknown) => {
        throw await this.lostOr(err);
      });
      return await new Promise<RunResult>((resolve, reject) => {
        const out = new ByteTail(opts.stdoutCap ?? Infinity);
        const err = new TailBuffer(DEFAULT_OUTPUT_CAP);
        let code: number | null = null;
        let signal: string | null = null;
        let gotStatus = false;
        channel.on('data', (d: Buffer) => out.push(d));
        channel.stderr.on('data', (d: Buffer) => err.push(d));
        channel.on('exit', (c: number | null, s?: string) => {
          gotStatus = true;
          code = c ?? null;
          signal = s ?? null;
        });
        channel.on('error', () => undefined);
        channel.on('close', () => {
          if (!gotStatus) {
            // No exit status: sshd (or the link) died before the command's end was reported.
            void this.lostOr(new Error('the channel closed without an exit status')).then((e) =>
              reject(e instanceof ConnectionLostError ? e : new ConnectionLostError((e as Error).message)),
            );
            return;
          }
          resolve({ code, signal, stdout: out.bytes(), stderr: err.text() });
        });
        channel.end(opts.stdin ?? '');
      });
    } finally {
      release();
    }
  }

  sftp(): Promise<SFTPWrapper> {
    if (this.closed) return Promise.reject(new ConnectionLostError('connection closed'));
    this.sftpSession ??= new Promise<SFTPWrapper>((resolve, reject) => {
      this.client.sftp((err, s) => {
        if (err) return reject(err);
        // A subsystem that ends while the connection lives must not stay cached.
        s.on('close', () => (this.sftpSession = null));
        resolve(s);
      });
    }).catch(async (err: unknown) => {
      this.sftpSession = null;
      throw await this.lostOr(err);
    });
    return this.sftpSession;
  }

  /** A direct-tcpip channel to address:port as the SSH host sees it. */
  forwardOut(port: number, address = '127.0.0.1'): Promise<ClientChannel> {
    if (this.closed) return Promise.reject(new ConnectionLostError('connection closed'));
    return new Promise((resolve, reject) => {
      this.client.forwardOut('127.0.0.1', 0, address, port, (err, ch) => (err ? reject(err) : resolve(ch)));
    });
  }
}

/** The last `cap` bytes of a byte stream (binary-safe, unlike TailBuffer's text). */
class ByteTail {
  private chunks: Buffer[] = [];
  private size = 0;
  constructor(private readonly cap: number) {}
  push(d: Buffer): void {
    this.chunks.push(d);
    this.size += d.length;
    if (this.size > 2 * this.cap) this.chunks = [this.bytes()];
  }
  bytes(): Buffer {
    const all = Buffer.concat(this.chunks);
    this.size = Math.min(all.length, this.cap);
    return all.length > this.cap ? all.subarray(all.length - this.cap) : all;
  }
}

export interface LinkStats {
  connects: number;
  drops: number;
}

export class SshLink {
  private current: Conn | null = null;
  private connecting: Promise<Conn> | null = null;
  private closing = false;
  readonly stats: LinkStats = { connects: 0, drops: 0 };
  /** Host keys checked on the last successful connect (for preflight's report). */
  lastKeys: VerifiedKey[] = [];

  constructor(
    readonly hostName: string,
    private readonly endpoint: () => Promise<SshEndpoint>,
    readonly tuning: LinkTuning = DEFAULT_LINK_TUNING,
  ) {}

  /** The live connection, connecting (once, for all callers) when there is none. */
  conn(): Promise<Conn> {
    if (this.closing) return Promise.reject(new Error(`host ${this.hostName}: the SSH link is closed`));
    if (this.current && !this.current.closed) return Promise.resolve(this.current);
    this.connecting ??= (async () => {
      try {
        const e = await this.endpoint();
        const c = await connectEndpoint(e, this.tuning, `host ${this.hostName}`);
        const conn = new Conn(c.client, c.jumps, c.keys, this.tuning.maxSessions);
        this.stats.connects++;
        this.lastKeys = c.keys;
        void conn.whenClosed.then(() => {
          if (!this.closing) this.stats.drops++;
          if (this.current === conn) this.current = null;
        });
        if (this.closing) conn.destroy();
        this.current = conn;
        return conn;
      } finally {
        this.connecting = null;
      }
    })();
    return this.connecting;
  }

  /**
   * Run an idempotent operation; when the link drops under it (or cannot be reopened yet),
   * wait, reconnect and run it again until the retry budget is spent. Trust and
   * configuration errors are not retried.
   */
  async retrying<T>(what: string, fn: (conn: Conn) => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.tuning.retryBudgetMs;
    let pause = 200;
    for (;;) {
      let conn: Conn;
      try {
        conn = await this.conn();
      } catch (err) {
        if (!(err instanceof SshConnectError) || Date.now() > deadline) throw err;
        await sleep(pause);
        pause = Math.min(pause * 2, 5_000);
        continue;
      }
      try {
        return await fn(conn);
      } catch (err) {
        if (!(err instanceof ConnectionLostError)) throw err;
        conn.destroy();
        if (Date.now() > deadline) {
          throw new SshConnectError(
            `host ${this.hostName}: ${what}: the connection kept dropping for ${Math.round(this.tuning.retryBudgetMs / 1000)} s (${err.message})`,
          );
        }
        await sleep(100);
      }
    }
  }

  async close(): Promise<void> {
    this.closing = true;
    const pending = this.connecting;
    if (pending)
      await pending.then(
        (c) => c.destroy(),
        () => undefined,
      );
    if (this.current) {
      const c = this.current;
      c.client.end();
      await Promise.race([c.whenClosed, sleep(2000)]);
      c.destroy();
    }
    this.current = null;
  }
}

export { SshTrustError, SshConnectError };
