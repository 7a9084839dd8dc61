/**
 * The SGLang simulator as a real child process in its own process group, for stage tests:
 * started on a free port, waited for until /health says 200, stopped by its pgid. `version`
 * picks the SGLang release it imitates (`aerie-sim sglang --version X.Y.Z`; default 0.5.23).
 */
import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns } from 'node:child_process';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { freePort } from '../../src/temporal/dev-server.js';

const ROOT = resolve(import.meta.dirname, '../..');

export interface Sim {
  /** The release it was started as (`version`), or undefined for the simulator's default. */
  version?: string;
  child: ChildProcess;
  pgid: number;
  baseUrl: string;
  log: () => string;
}

export async function startSim(
  env: Record<string, string> = {},
  args: string[] = [],
  opts: { version?: string } = {},
): Promise<Sim> {
  const port = await freePort();
  const release = opts.version ? ['--version', opts.version] : [];
  const child = spawn(
    process.execPath,
    [
      join(ROOT, 'bin/aerie-sim.mjs'),
      'sglang',
      ...release,
      '--model-path',
      join(ROOT, 'examples/models/sim-llama-8b'),
      '--port',
      String(port),
      ...args,
    ],
    {
      cwd: ROOT,
      detached: true, // setsid: its own process group, stopped by pgid in afterAll
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, AERIE_SIM_TIME_SCALE: '0.01', AERIE_SIM_DECODE_SCALE: '0.01', ...env },
    },
  );
  let log = '';
  child.stdout!.on('data', (d: Buffer) => (log += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (log += d.toString()));
  const sim: Sim = {
    version: opts.version,
    child,
    pgid: child.pid!,
    baseUrl: `http://127.0.0.1:${port}`,
    log: () => log,
  };
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`simulator exited (${child.exitCode}):\n${log}`);
    const status = await fetch(`${sim.baseUrl}/health`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) return sim;
    await new Promise((r) => setTimeout(r, 100));
  }
  await stopSim(sim);
  throw new Error(`simulator not ready within 60 s:\n${log}`);
}

export async function stopSim(sim: Sim): Promise<void> {
  if (sim.child.exitCode !== null || sim.child.signalCode !== null) return;
  const exited = new Promise((r) => sim.child.once('exit', r));
  try {
    process.kill(-sim.pgid, 'SIGTERM');
  } catch {
    return;
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-sim.pgid, 'SIGKILL');
    } catch {
      // already gone
    }
  }, 5000);
  await exited;
  clearTimeout(timer);
}

/**
 * The file's simulator, started in beforeAll and stopped by its pgid in afterAll. `launch` may be
 * a function, called in beforeAll, when the env or flags depend on what an earlier hook made.
 */
export function useSim(
  launch:
    | { env?: Record<string, string>; args?: string[]; version?: string }
    | (() => { env?: Record<string, string>; args?: string[]; version?: string }) = {},
): { readonly sim: Sim } {
  let sim: Sim | undefined;
  beforeAll(async () => {
    const l = typeof launch === 'function' ? launch() : launch;
    sim = await startSim(l.env, l.args, { version: l.version });
  }, 90_000);
  afterAll(async () => {
    if (sim) await stopSim(sim);
    sim = undefined;
  }, 30_000);
  return {
    get sim() {
      if (!sim) throw new Error('useSim(): the simulator is started in beforeAll; read it inside a hook or test');
      return sim;
    },
  };
}

/** `aerie-sim <args>` run to its end, synchronously: a CLI whose exit status and output the test reads; env over this process's. */
export function runSimCli(
  args: string[],
  env: Record<string, string> = {},
  opts: { timeoutMs?: number } = {},
): SpawnSyncReturns<string> {
  return spawnSync(process.execPath, [join(ROOT, 'bin/aerie-sim.mjs'), ...args], {
    encoding: 'utf8',
    env: { ...process.env, ...env },
    maxBuffer: 1 << 28,
    timeout: opts.timeoutMs,
  });
}
