/**
 * The simulator for bench/extract-scale.ts, in its own process group so that it is stopped by
 * pgid (the spawning of test/support/sim.ts, with a model path). An interrupted bench still
 * stops the simulators it started (temp dirs and the tmpfs stay then).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { freePort } from '../../src/temporal/dev-server.js';

const ROOT = resolve(import.meta.dirname, '../..');

export interface Sim {
  child: ChildProcess;
  pgid: number;
  port: number;
  baseUrl: string;
  log: () => string;
}

const live = new Set<Sim>();

/** On SIGINT/SIGTERM, kill every simulator still running and exit 130. */
export function stopSimsOnSignal(): void {
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      for (const s of live) kill(-s.pgid, 'SIGKILL');
      process.exit(130);
    });
  }
}

export async function startSim(model: string, env: Record<string, string>, args: string[]): Promise<Sim> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [join(ROOT, 'bin/aerie-sim.mjs'), 'sglang', '--model-path', model, '--port', String(port), ...args],
    {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, AERIE_SIM_TIME_SCALE: '0.01', AERIE_SIM_DECODE_SCALE: '0', ...env },
    },
  );
  let log = '';
  const keep = (d: Buffer): void => void (log = (log + d.toString()).slice(-20_000));
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const sim: Sim = { child, pgid: child.pid!, port, baseUrl: `http://127.0.0.1:${port}`, log: () => log };
  live.add(sim);
  child.once('exit', () => live.delete(sim));
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`simulator exited (${child.exitCode}):\n${log}`);
    if (
      (await fetch(`${sim.baseUrl}/health`).then(
        (r) => r.status,
        () => 0,
      )) === 200
    )
      return sim;
    await new Promise((r) => setTimeout(r, 100));
  }
  await stopSim(sim);
  throw new Error(`simulator not ready within 120 s:\n${log}`);
}

/** Signal our own process group; false when it is already gone. */
function kill(pgid: number, sig: NodeJS.Signals): boolean {
  try {
    process.kill(pgid, sig);
    return true;
  } catch {
    return false;
  }
}

export async function stopSim(sim: Sim): Promise<void> {
  if (sim.child.exitCode !== null || sim.child.signalCode !== null) return;
  const exited = new Promise((r) => sim.child.once('exit', r));
  if (!kill(-sim.pgid, 'SIGTERM')) return;
  const timer = setTimeout(() => kill(-sim.pgid, 'SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}
