/**
 * A worker process (a real `aerie worker`, as a user starts one, or a test's own entry point)
 * in its own process group, so a test can SIGKILL it mid-stage and stop it by its recorded
 * pgid, its output in a log file.
 */
import { spawn } from 'node:child_process';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { AERIE_HOME } from '../../src/config/load.js';

export { signalGroup } from './processes.js';

/**
 * Starts `node <args>` in its own process group, stdout and stderr appended to `logPath`, with
 * the test's environment plus `env`; returns its pgid (stop it with signalGroup).
 */
export async function spawnWorkerProcess(
  args: string[],
  logPath: string,
  env: NodeJS.ProcessEnv = {},
): Promise<number> {
  const log = await open(logPath, 'a');
  const child = spawn(process.execPath, args, {
    env: { ...process.env, ...env },
    detached: true,
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  return child.pid!;
}

/** Starts `aerie worker` against the dev server at `address`; returns its pgid. */
export function spawnAerieWorker(address: string, logPath: string): Promise<number> {
  return spawnWorkerProcess([join(AERIE_HOME, 'bin', 'aerie.mjs'), 'worker'], logPath, {
    TEMPORAL_ADDRESS: address,
    TEMPORAL_NAMESPACE: 'default',
  });
}
