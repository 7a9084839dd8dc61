/**
 * The fault matrix's cases: how each one slows the pipeline down enough to land its fault,
 * injects it, and says when it was noticed. matrix.test.ts runs them and checks the invariants.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { expect } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { pendingActivities } from '../../src/cli/follow-run.js';
import type { SshFixture } from '../support/ssh-fixture.js';
import { waitUntil } from '../support/temporal.js';
import type { RunFacts } from './facts.js';
import type { FaultRig } from './rig.js';
import { runOk } from '../support/processes.js';

export interface CaseCtx {
  rig: FaultRig;
  handle: WorkflowHandle;
  runId: string;
  workdir: string;
  /** Ledger snapshot at the moment of the fault: stages finished before it must not change. */
  markFault(ledger?: RunFacts['ledger'], at?: number): Promise<void>;
  detected(at?: number): void;
}

export interface FaultCase {
  name: string;
  /**
   * Which demo the case runs: the default (aerie's capture in the extraction server + the
   * specforge CLI) or the legacy drivers (prepare_hidden_states v0.2.0 + the v0.2 scripts'
   * trainer), each against its own reference.
   */
  variant?: 'cli' | 'legacy';
  tweak?: (c: Config) => void;
  /** Before the run starts (e.g. a mount); returns what undoes it, run whatever happens. */
  prepare?: (where: { workdir: string; runId: string }) => Promise<() => Promise<void>>;
  inject: (ctx: CaseCtx) => Promise<void>;
  /** Launch ids (relative to the run) this case is allowed to add beyond the reference run's. */
  extraLaunches?: string[];
  expectFailure?: RegExp;
}

/** What the cases need from the suite, available once its beforeAll and reference run are done. */
export interface SuiteEnv {
  ssh(): SshFixture;
  ledgerNow(workdir: string, runId: string): Promise<RunFacts['ledger']>;
  /** Bytes of the reference run's generate shards: what sizes the small disk. */
  referenceShardBytes(): number;
}

const run = runOk;

/** run.heartbeat-timeout in every case: a killed worker costs this long, not the default 30 s. */
export const HEARTBEAT_TIMEOUT_MS = 10_000;

/** When a launch died (its exit file) and when its successor was recorded: the detect time of a crash. */
async function crashAndRelaunch(
  workdir: string,
  runId: string,
  crashed: string,
  next: string,
): Promise<{ crashedAt: number; relaunchedAt: number }> {
  const procs = join(workdir, '.aerie', 'procs');
  const rec = await waitUntil(
    async () => readFile(join(procs, `${runId}.${next}.json`), 'utf8').catch(() => undefined),
    `launch ${next}`,
    180_000,
    100,
  );
  const exit = await stat(join(procs, `${runId}.${crashed}.exit`));
  return { crashedAt: exit.mtimeMs, relaunchedAt: Date.parse((JSON.parse(rec) as { startedAt: string }).startedAt) };
}

/** Wait until the named activity is in flight (and, optionally, its heartbeat says so). */
async function activityRunning(
  handle: WorkflowHandle,
  type: string,
  ready: (d: Record<string, unknown>) => boolean = () => true,
): Promise<void> {
  await waitUntil(
    async () =>
      (await pendingActivities(handle)).some(
        (a) => a.activityType === type && a.details !== undefined && ready(a.details as Record<string, unknown>),
      ),
    `${type} to be running`,
    180_000,
    100,
  );
}

/** A launch's process record (as aerie wrote it on the host). */
async function launchRecord(
  workdir: string,
  runId: string,
  launch: string,
): Promise<{ pid: number; argv: string[]; exitPath: string }> {
  return JSON.parse(await readFile(join(workdir, '.aerie', 'procs', `${runId}.${launch}.json`), 'utf8')) as {
    pid: number;
    argv: string[];
    exitPath: string;
  };
}

/** Wait until the activity shows a second attempt: the fault was noticed. */
async function retried(handle: WorkflowHandle, type: string): Promise<void> {
  await waitUntil(
    async () => (await pendingActivities(handle)).some((a) => a.activityType === type && a.attempt >= 2),
    `${type} attempt 2`,
    180_000,
    100,
  );
}

/** The generate server crashes once (the simulator fault, one-shot by its marker file) and is relaunched. */
const serverCrash = (name: string, fault: string, once: string): FaultCase => ({
  name,
  tweak: (c) => {
    c.server.env.AERIE_SIM_FAULT = fault;
    c.server.env.AERIE_SIM_FAULT_ONCE = `\${AERIE_FAULT_ONCE_DIR}/${once}`;
  },
  extraLaunches: ['server-generate.1'],
  async inject({ workdir, runId, markFault, detected }) {
    const t = await crashAndRelaunch(workdir, runId, 'server-generate.0', 'server-generate.1');
    await markFault({}, t.crashedAt);
    detected(t.relaunchedAt);
  },
});

interface KillWorker {
  stage: string;
  activity: string;
  ready?: (d: Record<string, unknown>) => boolean;
  variant?: FaultCase['variant'];
  /**
   * The detached job the kill must leave running: the new worker re-attaches to it (same
   * launch, same pid) while it still runs, and never launches it again.
   */
  detached?: string;
  name?: string;
}

const killWorkerDuring = ({ stage, activity, ready, variant, detached, name }: KillWorker): FaultCase => ({
  name: name ?? `worker SIGKILL during ${stage}`,
  variant,
  tweak: (c) => {
    // Slow the interrupted stage down enough to land the kill inside it.
    if (stage === 'generate' || stage === 'benchmark') c.server.env.AERIE_SIM_DECODE_SCALE = '1';
    if (stage === 'extract') slowExtract(c);
    // v0.2 and CLI trainers alike: ~30 s (6 s start-up, 192 steps), so the re-attach comes before its end.
    if (stage === 'train') c.stages.train.env.AERIE_SIM_TIME_SCALE = '0.3';
    if (stage === 'deploy') c.server.env.AERIE_SIM_TIME_SCALE = '0.3';
  },
  async inject({ rig, handle, workdir, runId, markFault, detected }) {
    await activityRunning(handle, activity, ready);
    const before = detached ? await launchRecord(workdir, runId, detached) : undefined;
    await markFault();
    const killedAt = Date.now();
    rig.killWorker('main');
    await rig.startWorker('main');
    await retried(handle, activity);
    detected();
    const retriedAt = Date.now();
    // Noticed through the configured timeout, not the 30 s default (generous slack for a busy machine).
    expect(retriedAt - killedAt).toBeLessThan(HEARTBEAT_TIMEOUT_MS + 15_000);
    if (before) {
      // The job outlived the worker and was still running when the second attempt took over;
      // the run's launches (compared with the reference's) show it was never launched again.
      await handle.result().catch(() => undefined);
      const after = await launchRecord(workdir, runId, detached!);
      expect(after.pid, `${detached} is the process launched before the kill`).toBe(before.pid);
      expect((await stat(after.exitPath)).mtimeMs, `${detached} ran on after the second attempt began`).toBeGreaterThan(
        retriedAt,
      );
    }
  },
});

/**
 * Extraction long enough to land a fault inside it. prepare_hidden_states: ~20 s start-up +
 * ~10 s of files, so the worker dies early in it and its successor (after the 10 s heartbeat
 * timeout) finds it still running. The capture server: slower prefills (the simulator's
 * AERIE_SIM_PREFILL_SCALE), so the 96 samples take ~30 s.
 */
function slowExtract(c: Config): void {
  if (c.stages.extract.driver === 'specforge-offline') c.stages.extract.env.AERIE_SIM_TIME_SCALE = '2';
  else c.server.env.AERIE_SIM_PREFILL_SCALE = PREFILL_SCALE;
}
const PREFILL_SCALE = '40';

/** The extract activity of the case's driver. */
const extractActivity = (c: Config): string =>
  c.stages.extract.driver === 'specforge-offline' ? 'extractOffline' : 'extractHiddenStates';

/** generateData's pending attempt as one describe() saw it, with when Temporal recorded its last failure. */
async function pendingGenerate(
  handle: WorkflowHandle,
): Promise<{ attempt: number; lastFailure: string; phase?: unknown; failedAtMs?: number } | undefined> {
  const p = (await handle.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'generateData');
  if (!p) return undefined;
  const t = p.lastAttemptCompleteTime;
  const beat = p.heartbeatDetails?.payloads?.[0];
  const details = beat ? (defaultPayloadConverter.fromPayload(beat) as { phase?: unknown }) : undefined;
  return {
    attempt: p.attempt ?? 1,
    lastFailure: p.lastFailure?.message ?? '',
    phase: details?.phase,
    failedAtMs: t?.seconds ? Number(t.seconds) * 1000 + Math.floor((t.nanos ?? 0) / 1e6) : undefined,
  };
}

const sha256 = async (p: string) =>
  createHash('sha256')
    .update(await readFile(p))
    .digest('hex');

/** What a full disk may leave in the shard dir: whole shards the index vouches for, no temp file. */
async function checkNoPartialShard(shardDir: string): Promise<void> {
  const names = await readdir(shardDir);
  expect(
    names.filter((n) => n.startsWith('.')),
    'temp files left in the shard dir',
  ).toEqual([]);
  const index = new Map<string, string>();
  for (const line of (await readFile(join(shardDir, 'index.jsonl'), 'utf8').catch(() => '')).split('\n')) {
    try {
      const e = JSON.parse(line) as { file: string; sha256: string };
      index.set(e.file, e.sha256);
    } catch {
      // a line the full disk cut short: its shard (if renamed into place) is whole anyway
    }
  }
  for (const n of names.filter((x) => /^[a-z]+-\d+\.jsonl$/.test(x))) {
    const text = await readFile(join(shardDir, n), 'utf8');
    expect(text.endsWith('\n'), `${n} ends with a whole row`).toBe(true);
    if (index.has(n)) expect(await sha256(join(shardDir, n)), `${n} is what the index says`).toBe(index.get(n));
  }
}

/**
 * A tmpfs over the run's generate output dir only: preflight (which checks the run folder)
 * passes, the server's logs and the ledger keep their disk, and the shards run out of room.
 * A tmpfs over all of runs/ (the first attempt at this case) is refused by preflight's disk
 * estimate before generate ever starts, so the run ended as PreflightFailed and no retried
 * ENOSPC could appear.
 */
const diskFull = (env: SuiteEnv): FaultCase => {
  let dataDir = '';
  return {
    name: 'disk full in the output dir during generate',
    tweak: (c) => {
      // Several shards, so the disk fills between whole shards, after some are safely written.
      c.stages.generate['shard-size'] = 8;
    },
    async prepare({ workdir, runId }) {
      dataDir = join(workdir, 'runs', runId, 'data');
      await mkdir(dataDir, { recursive: true });
      // Room for about 40% of the shards (tmpfs counts whole 4 KiB pages).
      const size = Math.ceil((env.referenceShardBytes() * 0.4) / 4096) * 4096;
      await run('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0755`, 'aerie-fault-disk', dataDir]).catch(
        (err: Error) => {
          throw new Error(
            `the disk-full case mounts a small tmpfs and needs root (CAP_SYS_ADMIN); mount ${dataDir} failed: ${err.message}`,
          );
        },
      );
      return async () => {
        // Only this mount, by the path this case created; lazily if something still holds it.
        await run('umount', [dataDir]).catch(() => run('umount', ['-l', dataDir]));
      };
    },
    async inject({ handle, workdir, runId, markFault, detected }) {
      const full = await waitUntil(
        async () => {
          const g = await pendingGenerate(handle);
          // What `aerie status` and the Web UI show: the failure, and a heartbeat saying why.
          return g && g.attempt >= 2 && /no space/i.test(g.lastFailure) && g.phase === 'disk full' ? g : undefined;
        },
        'generate to fail for lack of space, say "disk full" and wait for its retry',
        180_000,
        100,
      );
      // The fault is the refused write; Temporal recorded when that attempt failed.
      await markFault(await env.ledgerNow(workdir, runId), full.failedAtMs);
      detected();
      expect(full.lastFailure).toMatch(
        /no space left on device \(ENOSPC\) writing \S+\/data\/\S* on local( \(\d+ bytes\))?: .* \(\d+ bytes\) free there\. Fix: free space/,
      );
      expect(full.lastFailure).toContain(dataDir);
      await checkNoPartialShard(join(dataDir, 'shards'));
      // Some shards were saved before the disk filled: the resume has whole shards to keep.
      expect((await readdir(join(dataDir, 'shards'))).filter((n) => /^ok-\d+\.jsonl$/.test(n)).length).toBeGreaterThan(
        0,
      );
      // Space freed by an operator: the next retry resumes from the shards on disk.
      await run('mount', ['-o', 'remount,size=256m', dataDir]);
    },
  };
};

/**
 * The trainer dies at step 100 of 192 (epoch 2; checkpoints every 40 steps) and is relaunched
 * from the newest complete checkpoint, step 80: the CLI with training.resume_from, v0.2.0 with
 * aerie's continuation from that checkpoint.
 */
const trainerCrash = (env: SuiteEnv, name: string, variant: 'cli' | 'legacy'): FaultCase => ({
  name,
  variant,
  tweak: (c) => {
    c.stages.train.env.AERIE_SIM_TRAIN_CRASH_AT_STEP = '100';
    c.stages.train.env.AERIE_SIM_FAULT_ONCE = '${AERIE_FAULT_ONCE_DIR}/trainer';
  },
  extraLaunches: ['train.1'],
  async inject({ handle, workdir, runId, markFault, detected }) {
    const t = await crashAndRelaunch(workdir, runId, 'train.0', 'train.1');
    await markFault(await env.ledgerNow(workdir, runId), t.crashedAt);
    detected(t.relaunchedAt);
    const relaunch = (await launchRecord(workdir, runId, 'train.1')).argv.join(' ');
    if (variant === 'cli') expect(relaunch).toMatch(/training\.resume_from=\S*\/demo-step80(\s|$)/);
    // v0.2.0's --ckpt-dir dies (SpecForge@73e6f808:scripts/train_eagle3.py:338,402): aerie continues
    // with the old --resume in a segment dir that links the step-80 checkpoint, for the 112 steps owed.
    else expect(relaunch).toMatch(/--resume .*--max-num-steps 112 .*--output-dir \S*\/resume_step_80(\s|$)/);
    await handle.result().catch(() => undefined);
    expect(await readFile(join(workdir, 'once', 'trainer'), 'utf8')).toMatch(/fired by aerie-sim/);
  },
});

export function faultCases(env: SuiteEnv): FaultCase[] {
  return [
    killWorkerDuring({ stage: 'generate', activity: 'generateData', ready: (d) => Number(d.done ?? 0) > 0 }),
    // prepare_hidden_states.py runs detached: launched, then followed from its log.
    // The capture server launched before the kill is re-attached, never launched again.
    killWorkerDuring({
      stage: 'extract',
      activity: 'extractHiddenStates',
      ready: (d) => d.phase === 'extracting' && Number(d.ok ?? 0) > 0,
      detached: 'server-extract.0',
    }),
    killWorkerDuring({
      stage: 'train',
      activity: 'trainDrafter',
      ready: (d) => Number(d.step ?? 0) > 0,
      detached: 'train.0',
    }),
    killWorkerDuring({ stage: 'deploy', activity: 'awaitServerReady' }),
    killWorkerDuring({ stage: 'benchmark', activity: 'benchmarkSweep', ready: (d) => d.concurrency !== undefined }),
    {
      name: 'Temporal dev server SIGKILL + restart during train',
      tweak: (c) => (c.stages.train.env.AERIE_SIM_TIME_SCALE = '0.1'),
      async inject({ rig, handle, markFault, detected }) {
        await activityRunning(handle, 'trainDrafter', (d) => Number(d.step ?? 0) > 0);
        await markFault();
        await rig.crashAndRestartTemporal();
        detected();
      },
    },
    trainerCrash(env, 'trainer crash mid-epoch', 'cli'),
    serverCrash('model server crash during load', 'exit-during-load', 'load'),
    serverCrash('model server crash on first decode', 'crash-first-decode', 'decode'),
    {
      name: 'run cancelled by the user during train',
      tweak: (c) => (c.stages.train.env.AERIE_SIM_TIME_SCALE = '0.2'),
      expectFailure: /cancel/i,
      async inject({ handle, markFault, detected }) {
        await activityRunning(handle, 'trainDrafter', (d) => Number(d.step ?? 0) > 0);
        await markFault();
        await handle.cancel();
        detected();
      },
    },
    sshCutDuringExtract(env, 'SSH session cut during extract', 'cli'),
    diskFull(env),
    // The legacy drivers (prepare_hidden_states v0.2.0, the v0.2 scripts' trainer) stay in CI.
    killWorkerDuring({
      name: 'legacy: worker SIGKILL during offline extract',
      stage: 'extract',
      activity: 'extractOffline',
      ready: (d) => d.phase === 'extracting' && Number(d.pid ?? 0) > 0,
      detached: 'extract.0',
      variant: 'legacy',
    }),
    killWorkerDuring({
      name: 'legacy: worker SIGKILL during v0.2 train',
      stage: 'train',
      activity: 'trainDrafter',
      ready: (d) => Number(d.step ?? 0) > 0,
      variant: 'legacy',
      detached: 'train.0',
    }),
    trainerCrash(env, 'legacy: v0.2 trainer crash mid-epoch', 'legacy'),
  ];
}

/** The GPU host reached through a real sshd on loopback; its connections cut while extraction runs. */
function sshCutDuringExtract(env: SuiteEnv, name: string, variant: 'cli' | 'legacy'): FaultCase {
  let activity = '';
  return {
    name,
    variant,
    tweak: (c) => {
      // The same pipeline, but the GPU host is reached through a real sshd on loopback.
      const ssh = env.ssh();
      const workdir = c.hosts.local!.workdir;
      c.hosts = {
        gpu: {
          kind: 'ssh',
          ssh: { host: ssh.alias, 'config-file': ssh.sshConfig, 'strict-host-key-checking': 'yes' },
          workdir,
        },
      } as unknown as Config['hosts'];
      c.target.host = 'gpu';
      slowExtract(c);
      activity = extractActivity(c);
    },
    async inject({ handle, markFault, detected }) {
      const done = async () =>
        Number(
          ((await pendingActivities(handle)).find((a) => a.activityType === activity)?.details as { done?: number })
            ?.done ?? 0,
        );
      await activityRunning(handle, activity, (d) => Number(d.done ?? 0) > 0);
      const doneBefore = await done();
      await markFault();
      expect((await env.ssh().sshd.dropConnections()).length).toBeGreaterThan(0);
      // Detected and recovered when progress moves again over the new connection (or the job's end is read there).
      await waitUntil(
        async () =>
          !(await pendingActivities(handle)).some((x) => x.activityType === activity) || (await done()) > doneBefore,
        'extraction to progress over a new SSH connection',
        120_000,
        100,
      );
      detected();
    },
  };
}

/**
 * AERIE_FAULTS=ci runs the reduced matrix CI can afford; a comma list of name fragments picks
 * cases by hand; unset runs them all.
 */
const CI_CASES = [
  'worker SIGKILL during train',
  'trainer crash',
  'model server crash during load',
  'crash on first decode',
  'cancelled by the user',
  'disk full',
  'legacy: v0.2 trainer crash',
];
export function selectedCases(all: FaultCase[]): FaultCase[] {
  const want = process.env.AERIE_FAULTS;
  if (!want) return all;
  const parts = want === 'ci' ? CI_CASES : want.split(',').map((x) => x.trim());
  return all.filter((c) => parts.some((p) => c.name.includes(p)));
}
