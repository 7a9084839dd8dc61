/**
 * Test helpers (not a test file): a launcher that behaves like torchrun's elastic agent —
 * it starts its worker with start_new_session=True (torch 2.13
 * torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py:66),
 * passing its environment on (line 49) — and decoys that must survive a stop.
 */
import { spawn } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ProcRecord } from '../../src/hosts/host.js';
import { recordOfLeader, until } from './proc-helpers.js';

/**
 * argv: <mode> <dir>. The worker (own session) starts a child in its group, writes
 * "<worker pid> <child pid>" to <dir>/worker, and trains (sleeps) on. Modes:
 *  - wait: the launcher then waits (the test SIGKILLs it, as the OOM killer would);
 *  - die: the launcher SIGKILLs itself once the worker is up;
 *  - stubborn: like wait, and the worker and its child ignore SIGTERM;
 *  - leaderless: like wait, but the worker exits once its child runs, so the child's
 *    group has no leader left (the child must then be signalled by pid alone).
 */
export const TORCHRUN_LIKE = String.raw`
import os, signal, subprocess, sys, time
mode, out = sys.argv[1], sys.argv[2]
worker = r'''
import os, signal, subprocess, sys, time
mode, out = sys.argv[1], sys.argv[2]
if mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen(["sleep", "300"])
with open(out + "/worker.tmp", "w") as f:
    f.write("%d %d\n" % (os.getpid(), child.pid))
os.rename(out + "/worker.tmp", out + "/worker")
if mode == "leaderless":
    os._exit(0)
while True:
    time.sleep(1)
'''
w = subprocess.Popen([sys.executable, "-c", worker, mode, out], start_new_session=True)
while not os.path.exists(out + "/worker"):
    time.sleep(0.01)
print("launcher %d worker %d" % (os.getpid(), w.pid), flush=True)
if mode == "die":
    os.kill(os.getpid(), signal.SIGKILL)
time.sleep(300)
`;

export async function writeLauncher(dir: string): Promise<string> {
  const path = join(dir, 'torchrun_like.py');
  await writeFile(path, TORCHRUN_LIKE);
  return path;
}

/** The launcher's and worker's pids from its log, and the worker's child from <dir>/worker. */
export async function launchedPids(
  logPath: string,
  dir: string,
): Promise<{ launcher: number; worker: number; child: number }> {
  const line = await until('the launcher to report its worker', async () =>
    /launcher (\d+) worker (\d+)/.exec(await readFile(logPath, 'utf8').catch(() => '')),
  );
  const [worker, child] = (await readFile(join(dir, 'worker'), 'utf8')).trim().split(' ').map(Number);
  if (worker !== Number(line[2])) throw new Error(`worker file says ${worker}, the log ${line[2]}`);
  return { launcher: Number(line[1]), worker, child };
}

/** A process the test starts itself with the given environment, in a group of its own. Hand-built on purpose: a decoy the escape scan must not take for the launch's. */
export async function startDecoy(argv: string[], env: Record<string, string>): Promise<ProcRecord> {
  const child = spawn(argv[0], argv.slice(1), {
    detached: true,
    stdio: 'ignore',
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env },
  });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  child.unref();
  return recordOfLeader(child.pid!, 'decoy');
}

export async function environOf(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/environ`, 'latin1')).split('\0');
}

/**
 * argv prefix that runs a command as another user (nobody), when the tests run as root —
 * root can read every environ, so only the uid check keeps such a process out. Empty when
 * not root: then another user's environ is unreadable to us anyway.
 */
export function asOtherUser(): string[] | null {
  return process.geteuid?.() === 0 ? ['setpriv', '--reuid=65534', '--regid=65534', '--clear-groups'] : null;
}

/** The decoys every escape test starts: none carries this launch's token as a process of ours. */
export async function startDecoys(token: string): Promise<ProcRecord[]> {
  const decoys = [
    await startDecoy(['sleep', '300'], {}),
    await startDecoy(['sleep', '300'], { AERIE_LAUNCH: `${token}0` }),
    await startDecoy(['sh', '-c', 'sleep 300; : "$0"', `AERIE_LAUNCH=${token}`], {}),
  ];
  const other = asOtherUser();
  if (other) decoys.push(await startDecoy([...other, 'sleep', '300'], { AERIE_LAUNCH: token }));
  return decoys;
}
