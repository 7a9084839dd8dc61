/**
 * A real `aerie worker` process, as a user starts one, in its own process group (so a test
 * can SIGKILL it mid-stage and stop it by its recorded pgid), its output in a log file.
 */
import { spawn } from 'node:child_process';
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { AERIE_HOME } from '../../src/config/load.js';

export { signalGroup } from './processes.js';

/** Starts `aerie worker` against the dev server at `address`; returns its pgid. */
export async function spawnAerieWorker(address: string, logPath: string): Promise<number> {
  const log = await open(logPath, 'a');
  const child = spawn(process.execPath, [join(AERIE_HOME, 'bin', 'aerie.mjs'), 'worker'], {
    env: { ...process.env, TEMPORAL_ADDRESS: address, TEMPORAL_NAMESPACE: 'default' },
    detached: true,
    stdio: ['ignore', log.fd, log.fd],
  });
  await log.close();
  return child.pid!;
}
