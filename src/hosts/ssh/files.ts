/**
 * Files on an SSH host with the Host interface's guarantees (atomic replace, absent-is-null
 * stat, tailing by byte offset). ShellFiles does everything with fixed scripts through the
 * exec path — needed when an exec prefix puts the work inside a container, whose files the
 * SSH server's SFTP cannot see. SftpFiles uses the SFTP subsystem for the frequent calls
 * (read, atomic write, stat, list, tail) and the scripts for the rest.
 */
import { randomBytes } from 'node:crypto';
import type { SFTPWrapper, Stats } from 'ssh2';
import type { FileStat } from '../host.js';
import { ConnectionLostError, type Conn, type SshLink } from './link.js';
import {
  APPEND_AT,
  CAT_IF_PRESENT,
  EXIT_ABSENT,
  EXIT_IS_DIR,
  FREE_BYTES,
  LIST,
  MKDIR_P,
  READ_FILE,
  REMOVE,
  RENAME,
  STAT,
  TAIL_FROM,
  WRITE_ATOMIC,
  parseCatIfPresent,
  parseFreeBytes,
  parseListing,
  parseStatLine,
  parseTail,
  remoteCommand,
} from './script.js';
import { completeUtf8Length } from '../util/index.js';

export const DEFAULT_TAIL_BYTES = 256 * 1024;

export function absentError(host: string, path: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`ENOENT: no such file or directory on ${host}: ${path}`), { code: 'ENOENT', path });
}

function tempNameFor(path: string): string {
  const slash = path.lastIndexOf('/');
  return `${path.slice(0, slash + 1)}.${path.slice(slash + 1)}.${randomBytes(6).toString('hex')}.tmp`;
}

function cutAtCharacter(from: number, data: Buffer): { data: string; offset: number } {
  if (data.length === 0) return { data: '', offset: from };
  const keep = completeUtf8Length(data) || data.length;
  return { data: data.subarray(0, keep).toString('utf8'), offset: from + keep };
}

function checkTailArgs(offset: number, maxBytes: number): void {
  if (!Number.isSafeInteger(offset) || offset < 0) throw new Error(`tailFrom: bad offset ${offset}`);
  if (!Number.isSafeInteger(maxBytes) || maxBytes <= 0) throw new Error(`tailFrom: bad maxBytes ${maxBytes}`);
}

export class ShellFiles {
  constructor(
    protected readonly link: SshLink,
    protected readonly hostName: string,
    protected readonly execPrefix: readonly string[],
  ) {}

  /** One idempotent script run, retried across reconnects; non-zero exits are returned, not thrown. */
  async query(what: string, script: string, args: (string | number)[], stdin?: Buffer | string) {
    return this.link.retrying(what, (c) => c.run(remoteCommand(script, args, this.execPrefix), { stdin }));
  }

  protected failed(what: string, path: string, r: { code: number | null; stderr: string }): Error {
    if (r.code === EXIT_ABSENT) return absentError(this.hostName, path);
    if (r.code === EXIT_IS_DIR)
      return Object.assign(new Error(`EISDIR: ${path} on ${this.hostName} is a directory`), { code: 'EISDIR' });
    return new Error(`${what} ${path} on ${this.hostName} failed (exit ${r.code}): ${r.stderr.trim().slice(0, 500)}`);
  }

  /** A small file's bytes, or null when it does not exist (pid files, exit files, /proc entries). */
  async readIfPresent(path: string): Promise<Buffer | null> {
    return parseCatIfPresent((await this.query(`read ${path}`, CAT_IF_PRESENT, [path])).stdout);
  }

  async readFile(path: string): Promise<Buffer> {
    const r = await this.query(`read ${path}`, READ_FILE, [path]);
    if (r.code !== 0) throw this.failed('read', path, r);
    return r.stdout;
  }

  async writeFileAtomic(path: string, data: string | Buffer, opts: { private?: boolean } = {}): Promise<void> {
    // The temp name is fixed across retries, so a retry overwrites its own half-written temp file.
    const tmp = tempNameFor(path);
    const r = await this.query(`write ${path}`, WRITE_ATOMIC, [path, tmp, opts.private ? 'private' : ''], data);
    if (r.code !== 0) throw this.failed('write', path, r);
  }

  /**
   * Appends at the size seen first, so a retried append replaces its own bytes instead of
   * doubling them. Two appends to one path at once would both see the same size and overwrite
   * each other: appends to a path are therefore queued, one after the other.
   */
  appendFile(path: string, data: string | Buffer): Promise<void> {
    const prev = this.appending.get(path) ?? Promise.resolve();
    const mine = prev
      .catch(() => undefined)
      .then(async () => {
        const before = (await this.stat(path))?.size ?? 0;
        const r = await this.query(`append to ${path}`, APPEND_AT, [path, before], data);
        if (r.code !== 0) throw this.failed('append to', path, r);
      });
    this.appending.set(path, mine);
    void mine
      .finally(() => {
        if (this.appending.get(path) === mine) this.appending.delete(path);
      })
      .catch(() => undefined);
    return mine;
  }

  private readonly appending = new Map<string, Promise<void>>();

  async stat(path: string): Promise<FileStat | null> {
    const r = await this.query(`stat ${path}`, STAT, [path]);
    if (r.code === EXIT_ABSENT) return null;
    if (r.code !== 0) throw this.failed('stat', path, r);
    return parseStatLine(path, r.stdout.toString('utf8'));
  }

  async list(dir: string): Promise<FileStat[]> {
    const r = await this.query(`list ${dir}`, LIST, [dir]);
    if (r.code !== 0) throw this.failed('list', dir, r);
    return parseListing(dir, r.stdout);
  }

  async mkdirp(path: string): Promise<void> {
    const r = await this.query(`mkdir ${path}`, MKDIR_P, [path]);
    if (r.code !== 0) throw this.failed('mkdir -p', path, r);
  }

  async rename(from: string, to: string): Promise<void> {
    const r = await this.query(`rename ${from}`, RENAME, [from, to]);
    if (r.code !== 0) throw this.failed(`rename to ${to}:`, from, r);
  }

  async remove(path: string): Promise<void> {
    const r = await this.query(`remove ${path}`, REMOVE, [path]);
    if (r.code !== 0) throw this.failed('remove', path, r);
  }

  async tailFrom(
    path: string,
    offset: number,
    maxBytes = DEFAULT_TAIL_BYTES,
  ): Promise<{ data: string; offset: number }> {
    checkTailArgs(offset, maxBytes);
    const r = await this.query(`tail ${path}`, TAIL_FROM, [path, offset, maxBytes]);
    if (r.code !== 0) throw this.failed('tail', path, r);
    const t = parseTail(r.stdout);
    if (!t) return { data: '', offset };
    return cutAtCharacter(t.from, t.data);
  }

  async freeBytes(path: string): Promise<number> {
    const r = await this.query(`free space at ${path}`, FREE_BYTES, [path]);
    if (r.code !== 0) throw this.failed('statfs', path, r);
    return parseFreeBytes(r.stdout.toString('utf8'));
  }
}

// ---- SFTP ----------------------------------------------------------------------------

const SFTP_EOF = 1;
const SFTP_NO_SUCH_FILE = 2;
/**
 * Above this, whole-file reads and writes stream through a command instead: one SFTP
 * request in flight at a time is latency-bound (ssh2 reads ~25 MB/s, writes less, on
 * loopback), while `cat` streams at channel speed.
 */
const SFTP_BULK_LIMIT = 1 << 20;

function call<T>(fn: (cb: (err: Error | undefined | null, v: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, v) => (err ? reject(err) : resolve(v))));
}

function isNoSuchFile(err: unknown): boolean {
  return (err as { code?: unknown }).code === SFTP_NO_SUCH_FILE;
}

function toFileStat(path: string, s: Stats): FileStat {
  return { path, size: Number(s.size), isDirectory: s.isDirectory(), mtimeMs: Number(s.mtime) * 1000 };
}

export class SftpFiles extends ShellFiles {
  /** One SFTP exchange on the current connection, retried on a fresh one if the link drops. */
  private sftp<T>(what: string, fn: (s: SFTPWrapper, conn: Conn) => Promise<T>): Promise<T> {
    return this.link.retrying(what, (conn) => {
      const work = (async () => {
        const s = await conn.sftp();
        try {
          return await fn(s, conn);
        } catch (err) {
          // SFTP status errors carry a numeric code; anything else while the link dies is a lost link.
          if (typeof (err as { code?: unknown }).code === 'number') throw err;
          throw await conn.lostOr(err);
        }
      })();
      // ssh2 does not always answer a request (or the subsystem open) whose channel died
      // with the connection; without this such an operation waited forever instead of being retried.
      return new Promise<T>((resolve, reject) => {
        const unwatch = conn.watchClose(() => reject(new ConnectionLostError(`connection lost during ${what}`)));
        work.then(
          (v) => (unwatch(), resolve(v)),
          (err: unknown) => (unwatch(), reject(err)),
        );
      });
    });
  }

  /** Read until EOF (not up to the stat size: /proc files say 0 bytes); null when absent. */
  override async readIfPresent(path: string): Promise<Buffer | null> {
    try {
      return await this.sftp(`read ${path}`, async (s) => {
        const handle = await call<Buffer>((cb) => s.open(path, 'r', cb as never));
        const chunks: Buffer[] = [];
        try {
          for (let at = 0; ;) {
            const buf = Buffer.alloc(64 * 1024);
            const n = await new Promise<number>((resolve, reject) =>
              s.read(handle, buf, 0, buf.length, at, (err, bytesRead) =>
                err ? ((err as { code?: unknown }).code === SFTP_EOF ? resolve(0) : reject(err)) : resolve(bytesRead),
              ),
            );
            if (n <= 0) break;
            chunks.push(buf.subarray(0, n));
            at += n;
          }
        } finally {
          await call((cb) => s.close(handle, cb as never)).catch(() => undefined);
        }
        return Buffer.concat(chunks);
      });
    } catch (err) {
      if (isNoSuchFile(err)) return null;
      throw err;
    }
  }

  override async readFile(path: string): Promise<Buffer> {
    const st = await this.stat(path);
    if (!st) throw absentError(this.hostName, path);
    if (st.isDirectory) return super.readFile(path); // the script reports EISDIR like fs does
    if (st.size > SFTP_BULK_LIMIT) return super.readFile(path);
    const data = await this.readIfPresent(path);
    if (data === null) throw absentError(this.hostName, path);
    return data;
  }

  override async writeFileAtomic(path: string, data: string | Buffer, opts: { private?: boolean } = {}): Promise<void> {
    const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    if (bytes.length > SFTP_BULK_LIMIT) return super.writeFileAtomic(path, bytes, opts);
    const tmp = tempNameFor(path);
    try {
      await this.sftp(`write ${path}`, async (s) => {
        const handle = await call<Buffer>((cb) =>
          s.open(tmp, 'w', { mode: opts.private ? 0o600 : 0o644 }, cb as never),
        );
        try {
          for (let at = 0; at < bytes.length; at += 256 * 1024) {
            const n = Math.min(256 * 1024, bytes.length - at);
            await call((cb) => s.write(handle, bytes, at, n, at, cb as never));
          }
          await call((cb) => s.ext_openssh_fsync(handle, cb as never)).catch(() => undefined);
        } finally {
          await call((cb) => s.close(handle, cb as never)).catch(() => undefined);
        }
      });
      // posix-rename@openssh.com replaces the target atomically (plain SFTP rename refuses
      // to); servers without the extension get rename(2) through mv -T.
      await this.sftp(`rename ${tmp}`, (s) => call((cb) => s.ext_openssh_rename(tmp, path, cb as never))).catch(
        (err: Error) => {
          if (!/not supported/i.test(err.message)) throw err;
          return this.rename(tmp, path);
        },
      );
    } catch (err) {
      await this.remove(tmp).catch(() => undefined);
      if (isNoSuchFile(err)) throw absentError(this.hostName, path);
      throw err;
    }
  }

  override async stat(path: string): Promise<FileStat | null> {
    try {
      return await this.sftp(`stat ${path}`, async (s) =>
        toFileStat(path, await call<Stats>((cb) => s.stat(path, cb as never))),
      );
    } catch (err) {
      if (isNoSuchFile(err)) return null;
      throw err;
    }
  }

  override async list(dir: string): Promise<FileStat[]> {
    const base = dir.endsWith('/') ? dir : `${dir}/`;
    try {
      return await this.sftp(`list ${dir}`, async (s) => {
        const entries = await call<{ filename: string; attrs: Stats }[]>((cb) => s.readdir(dir, cb as never));
        const out: FileStat[] = [];
        for (const e of entries) {
          if (e.filename === '.' || e.filename === '..') continue;
          const path = `${base}${e.filename}`;
          if (!e.attrs.isSymbolicLink()) {
            out.push(toFileStat(path, e.attrs));
            continue;
          }
          // Like fs.stat, follow links; a dangling one is left out.
          const target = await call<Stats>((cb) => s.stat(path, cb as never)).catch(() => null);
          if (target) out.push(toFileStat(path, target));
        }
        return out.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
      });
    } catch (err) {
      if (isNoSuchFile(err)) throw absentError(this.hostName, dir);
      throw err;
    }
  }

  override async tailFrom(
    path: string,
    offset: number,
    maxBytes = DEFAULT_TAIL_BYTES,
  ): Promise<{ data: string; offset: number }> {
    checkTailArgs(offset, maxBytes);
    try {
      return await this.sftp(`tail ${path}`, async (s) => {
        const handle = await call<Buffer>((cb) => s.open(path, 'r', cb as never));
        try {
          const size = Number((await call<Stats>((cb) => s.fstat(handle, cb as never))).size);
          const from = size < offset ? 0 : offset;
          const want = Math.min(maxBytes, size - from);
          if (want <= 0) return { data: '', offset: from };
          const buf = Buffer.alloc(want);
          let got = 0;
          while (got < want) {
            const n = await new Promise<number>((resolve, reject) =>
              s.read(handle, buf, got, want - got, from + got, (err, bytesRead) =>
                err ? reject(err) : resolve(bytesRead),
              ),
            );
            if (n <= 0) break;
            got += n;
          }
          return cutAtCharacter(from, buf.subarray(0, got));
        } finally {
          await call((cb) => s.close(handle, cb as never)).catch(() => undefined);
        }
      });
    } catch (err) {
      if (isNoSuchFile(err)) return { data: '', offset };
      throw err;
    }
  }
}
