/**
 * The job supervisor and a launch that outlives its leader, with real processes through
 * LocalHost: a torchrun-like launcher (test/hosts/escape-helpers.ts) starts its worker in a
 * session of its own and is SIGKILLed (as the OOM killer did on the H200,
 * test/fixtures/real/specforge-20e2e3f0/PROVENANCE.md). The worker must be stopped, and
 * reported, before the crash relaunch runs — never beside it.
 */
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { superviseJob, type Ended } from '../../src/stages/common/job-supervise.js';
import { launchedPids, writeLauncher } from '../hosts/escape-helpers.js';
import { isLive } from '../hosts/proc-helpers.js';
import { useLocalHost } from '../support/local-host.js';

const fx = useLocalHost('aerie-orphans-', { each: true, sub: 'host' });
let dir: string;
let host: LocalHost;

beforeEach(async () => {
  ({ dir, host } = fx);
});

/** The relaunch: fails unless the first launch's worker (pid in <out>/worker) is gone. */
const CHECK_WORKER_GONE = [
  'read w c < "$1/worker"',
  's=$(cat "/proc/$w/stat" 2>/dev/null) && case "${s##*) }" in Z*) ;; *) echo "worker $w still running"; exit 1;; esac',
  'echo "worker $w gone"',
].join('\n');

describe('superviseJob and processes that outlive the leader', () => {
  it('stops the escaped worker of a SIGKILLed torchrun before the crash relaunch, and says so in the heartbeat', async () => {
    const launcher = await writeLauncher(dir);
    const out = join(dir, 'out');
    await mkdir(out);
    const notes: string[] = [];
    const crashes: Ended[] = [];
    const logPath = (gen: number) => join(dir, `job-${gen}.log`);

    const run = superviseJob<string, number>(
      {
        host,
        prefix: 'r.train.',
        logPath,
        cwd: dir,
        env: {},
        crashRetries: 2,
        pollMs: 50,
        heartbeat: (d) => {
          if (d.note) notes.push(d.note);
        },
        what: 'trainer',
        crashType: 'TrainerCrashed',
      },
      {
        fresh: async () => ({ kind: 'launch', argv: ['python3', launcher, 'die', out] }),
        afterCrash: async (ended) => {
          crashes.push(ended);
          return { kind: 'launch', argv: ['sh', '-c', CHECK_WORKER_GONE, 'sh', out] };
        },
        afterSuccess: async (ended) => ({
          kind: 'done',
          result: (await readFile(ended.record.logPath, 'utf8')).trim(),
        }),
        classify: () => ({ kind: 'crash', retryable: true, advice: 'relaunch' }),
        failureType: () => 'TrainerFailed',
        parse: (_chunk, prev) => (prev ?? 0) + 1,
      },
    );
    const { worker } = await launchedPids(logPath(0), out);
    const { result, launches } = await run;

    expect(await isLive(worker)).toBe(false);
    expect(result).toBe(`worker ${worker} gone`);
    expect(launches).toBe(2);
    const remnants = 'python3 exited (code 137); 2 processes in sessions of their own still ran: stopped (TERM)';
    expect(notes).toEqual([remnants]);
    expect(crashes.map((c) => ({ gen: c.gen, code: c.code, remnants: c.remnants }))).toEqual([
      { gen: 0, code: 137, remnants },
    ]);
  });
});
