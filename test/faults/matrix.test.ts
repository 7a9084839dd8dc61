/**
 * Crash anywhere, lose nothing: each case is a real pipeline on the simulator through a
 * real dev server and real worker processes, with one fault injected on purpose. After
 * each case the run is checked against an uninterrupted reference run. The suite prints
 * the reliability table the README quotes (`npm run test:faults`).
 */
import { spawn } from 'node:child_process';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import { TASK_QUEUE, WORKFLOW_TYPE } from '../../src/shared.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { pendingActivities } from '../../src/cli/watch.js';
import { demoConfig } from '../support/demo-config.js';
import { startSshFixture, type SshFixture } from '../support/ssh-fixture.js';
import { waitUntil } from '../support/temporal.js';
import { bytesDiffering, duplicateLaunches, gatherFacts, liveInGroups, recordedGroups, stagesRedone, type RunFacts } from './facts.js';
import { FaultRig } from './rig.js';

const SECRET = `aerie-fault-secret-${process.pid}-do-not-log`;
process.env.AERIE_FAULT_SECRET = SECRET;

interface Row {
  case: string;
  outcome: string;
  detectS: string;
  recoverS: string;
  redone: string;
  duplicates: number;
  differing: number;
}

interface CaseCtx {
  rig: FaultRig;
  handle: WorkflowHandle;
  runId: string;
  workdir: string;
  /** Ledger snapshot at the moment of the fault: stages finished before it must not change. */
  markFault(ledger?: RunFacts['ledger'], at?: number): Promise<void>;
  detected(at?: number): void;
}

interface FaultCase {
  name: string;
  tweak?: (c: Config) => void;
  inject: (ctx: CaseCtx) => Promise<void>;
  /** Launch ids (relative to the run) this case is allowed to add beyond the reference run's. */
  extraLaunches?: string[];
  expectFailure?: RegExp;
}

let rig: FaultRig;
let ssh: SshFixture;
let reference: RunFacts;
const rows: Row[] = [];
let decoy: number;

/** When a launch died (its exit file) and when its successor was recorded: the detect time of a crash. */
async function crashAndRelaunch(workdir: string, runId: string, crashed: string, next: string): Promise<{ crashedAt: number; relaunchedAt: number }> {
  const procs = join(workdir, '.aerie', 'procs');
  const rec = await waitUntil(async () => readFile(join(procs, `${runId}.${next}.json`), 'utf8').catch(() => undefined), `launch ${next}`, 180_000, 100);
  const exit = await stat(join(procs, `${runId}.${crashed}.exit`));
  return { crashedAt: exit.mtimeMs, relaunchedAt: Date.parse((JSON.parse(rec) as { startedAt: string }).startedAt) };
}

async function ledgerNow(workdir: string, runId: string): Promise<RunFacts['ledger']> {
  return (await gatherFacts(rig.client, workdir, runId).catch(() => ({ ledger: {} }) as unknown as RunFacts)).ledger;
}

/** Wait until the named activity is in flight (and, optionally, its heartbeat says so). */
async function activityRunning(handle: WorkflowHandle, type: string, ready: (d: Record<string, unknown>) => boolean = () => true): Promise<void> {
  await waitUntil(
    async () => (await pendingActivities(handle)).some((a) => a.activityType === type && a.details !== undefined && ready(a.details as Record<string, unknown>)),
    `${type} to be running`,
    180_000,
    100,
  );
}

/** Wait until the activity shows a second attempt: the fault was noticed. */
async function retried(handle: WorkflowHandle, type: string): Promise<void> {
  await waitUntil(async () => (await pendingActivities(handle)).some((a) => a.activityType === type && a.attempt >= 2), `${type} attempt 2`, 180_000, 100);
}

const baseTweak = (c: Config) => {
  c.stages.benchmark.concurrencies = [1, 4];
  c.stages.benchmark['output-len'] = 32;
  // A secret the worker expands at launch time: it must never appear in the history.
  c.server.env.HF_TOKEN = '${AERIE_FAULT_SECRET}';
};

const killWorkerDuring = (stage: string, activity: string, ready?: (d: Record<string, unknown>) => boolean): FaultCase => ({
  name: `worker SIGKILL during ${stage}`,
  tweak: (c) => {
    // Slow the interrupted stage down enough to land the kill inside it.
    if (stage === 'generate' || stage === 'benchmark') c.server.env.AERIE_SIM_DECODE_SCALE = '1';
    if (stage === 'extract') {
      // Prefill-only requests are quick: one at a time, at a slower model, to land inside the stage.
      c.server.env.AERIE_SIM_DECODE_SCALE = '3';
      (c.stages.extract as { concurrency: number }).concurrency = 1;
    }
    if (stage === 'train') c.stages.train.env.AERIE_SIM_TIME_SCALE = '0.1';
    if (stage === 'deploy') c.server.env.AERIE_SIM_TIME_SCALE = '0.3';
  },
  async inject({ rig, handle, markFault, detected }) {
    await activityRunning(handle, activity, ready);
    await markFault();
    rig.killWorker('main');
    await rig.startWorker('main');
    await retried(handle, activity);
    detected();
  },
});

const CASES: FaultCase[] = [
  killWorkerDuring('generate', 'generateData', (d) => Number(d.done ?? 0) > 0),
  killWorkerDuring('extract', 'extractHiddenStates', (d) => Number(d.done ?? 0) > 0),
  killWorkerDuring('train', 'trainDrafter', (d) => Number(d.step ?? 0) > 0),
  killWorkerDuring('deploy', 'awaitServerReady'),
  killWorkerDuring('benchmark', 'benchmarkSweep', (d) => d.concurrency !== undefined),
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
  {
    name: 'trainer crash mid-epoch',
    tweak: (c) => {
      c.stages.train.env.AERIE_SIM_TRAIN_CRASH_AT_STEP = '100';
      c.stages.train.env.AERIE_SIM_FAULT_ONCE = '${AERIE_FAULT_ONCE_DIR}/trainer';
    },
    extraLaunches: ['train.1'],
    async inject({ workdir, runId, markFault, detected }) {
      const t = await crashAndRelaunch(workdir, runId, 'train.0', 'train.1');
      await markFault(await ledgerNow(workdir, runId), t.crashedAt);
      detected(t.relaunchedAt);
    },
  },
  {
    name: 'model server crash during load',
    tweak: (c) => {
      c.server.env.AERIE_SIM_FAULT = 'exit-during-load';
      c.server.env.AERIE_SIM_FAULT_ONCE = '${AERIE_FAULT_ONCE_DIR}/load';
    },
    extraLaunches: ['server-generate.1'],
    async inject({ workdir, runId, markFault, detected }) {
      const t = await crashAndRelaunch(workdir, runId, 'server-generate.0', 'server-generate.1');
      await markFault({}, t.crashedAt);
      detected(t.relaunchedAt);
    },
  },
  {
    name: 'model server crash on first decode',
    tweak: (c) => {
      c.server.env.AERIE_SIM_FAULT = 'crash-first-decode';
      c.server.env.AERIE_SIM_FAULT_ONCE = '${AERIE_FAULT_ONCE_DIR}/decode';
    },
    extraLaunches: ['server-generate.1'],
    async inject({ workdir, runId, markFault, detected }) {
      const t = await crashAndRelaunch(workdir, runId, 'server-generate.0', 'server-generate.1');
      await markFault({}, t.crashedAt);
      detected(t.relaunchedAt);
    },
  },
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
  {
    name: 'SSH session cut during extract',
    tweak: (c) => {
      // The same pipeline, but the GPU host is reached through a real sshd on loopback.
      const workdir = c.hosts.local!.workdir;
      c.hosts = { gpu: { kind: 'ssh', ssh: { host: ssh.alias, 'config-file': ssh.sshConfig, 'strict-host-key-checking': 'yes' }, workdir } } as unknown as Config['hosts'];
      c.target.host = 'gpu';
      c.server.env.AERIE_SIM_DECODE_SCALE = '1';
    },
    async inject({ handle, markFault, detected }) {
      await activityRunning(handle, 'extractHiddenStates', (d) => Number(d.done ?? 0) > 0);
      const doneBefore = Number(((await pendingActivities(handle)).find((a) => a.activityType === 'extractHiddenStates')?.details as { done?: number })?.done ?? 0);
      await markFault();
      expect((await ssh.sshd.dropConnections()).length).toBeGreaterThan(0);
      // Detected and recovered when progress moves again over the new connection.
      await waitUntil(
        async () => {
          const a = (await pendingActivities(handle)).find((x) => x.activityType === 'extractHiddenStates');
          return !a || Number((a.details as { done?: number })?.done ?? 0) > doneBefore;
        },
        'extraction to progress over a new SSH connection',
        120_000,
        100,
      );
      detected();
    },
  },
];

/**
 * AERIE_FAULTS=ci runs the reduced matrix CI can afford; a comma list of name fragments picks
 * cases by hand; unset runs them all.
 */
const CI_CASES = ['worker SIGKILL during train', 'trainer crash', 'model server crash during load', 'crash on first decode', 'cancelled by the user'];
function selectedCases(): FaultCase[] {
  const want = process.env.AERIE_FAULTS;
  if (!want) return CASES;
  const parts = want === 'ci' ? CI_CASES : want.split(',').map((x) => x.trim());
  return CASES.filter((c) => parts.some((p) => c.name.includes(p)));
}

beforeAll(async () => {
  [rig, ssh] = await Promise.all([FaultRig.start(), startSshFixture()]);
  // A process aerie never launched, in its own group: it must survive every case.
  decoy = spawn('sleep', ['3600'], { detached: true, stdio: 'ignore' }).pid!;
  await rig.startWorker('main');
}, 120_000);

afterAll(async () => {
  try {
    process.kill(-decoy, 'SIGKILL');
  } catch {
    // gone
  }
  await rig?.stop();
  await ssh?.stop();
  if (rows.length) {
    const table = renderTable(rows);
    console.log(`\n${table}\n`);
    // Only the full matrix replaces the recorded table the README quotes.
    if (!process.env.AERIE_FAULTS) {
      await mkdir(join(process.cwd(), 'bench', 'results'), { recursive: true });
      await writeFile(join(process.cwd(), 'bench', 'results', 'faults.md'), table + '\n');
    }
  }
});

function renderTable(r: Row[]): string {
  const head = '| case | outcome | time to detect (s) | time to recover (s) | stages redone | duplicate launches | outputs differing |';
  return [head, '|---|---|---|---|---|---|---|', ...r.map((x) => `| ${x.case} | ${x.outcome} | ${x.detectS} | ${x.recoverS} | ${x.redone} | ${x.duplicates} | ${x.differing} |`)].join('\n');
}

async function runPipeline(name: string, tweak: (c: Config) => void) {
  const slug = name.replace(/[^a-z0-9]+/gi, '-').toLowerCase();
  const workdir = join(rig.dir, 'cases', slug);
  const onceDir = join(workdir, 'once');
  await mkdir(onceDir, { recursive: true });
  process.env.AERIE_FAULT_ONCE_DIR = onceDir;
  const config = demoConfig(workdir, await freePort(), (c) => {
    baseTweak(c);
    tweak(c);
  });
  // Resolve the one-shot marker now: the worker processes do not share this env var.
  for (const env of [config.server.env, config.stages.train.env]) {
    for (const [k, v] of Object.entries(env)) env[k] = v.replace('${AERIE_FAULT_ONCE_DIR}', onceDir);
  }
  const runId = `fault-${slug}-${Date.now()}`.slice(0, 120);
  const handle = await rig.client.workflow.start(WORKFLOW_TYPE, { taskQueue: TASK_QUEUE, workflowId: runId, args: [{ runId, config, configPath: 'fault-matrix' }] });
  return { handle, runId, workdir };
}

describe('fault matrix', () => {
  it('reference run: uninterrupted', async () => {
    const { handle, runId, workdir } = await runPipeline('reference', () => undefined);
    const started = Date.now();
    await handle.result();
    reference = await gatherFacts(rig.client, workdir, runId);
    expect(Object.keys(reference.outputs).length).toBeGreaterThan(90);
    expect(reference.historyJson).not.toContain(SECRET);
    rows.push({ case: 'reference (no fault)', outcome: 'completed', detectS: '—', recoverS: `${((Date.now() - started) / 1000).toFixed(1)} total`, redone: '—', duplicates: 0, differing: 0 });
  }, 300_000);

  for (const fc of selectedCases()) {
    it(fc.name, async () => {
      expect(reference, 'the reference run must pass first').toBeDefined();
      await runCase(fc);
    }, 420_000);
  }
});

async function runCase(fc: FaultCase): Promise<void> {
  const { handle, runId, workdir } = await runPipeline(fc.name, fc.tweak ?? (() => undefined));
  let faultAt = 0;
  let detectedAt = 0;
  let before: RunFacts['ledger'] = {};
  await fc.inject({
    rig,
    handle,
    runId,
    workdir,
    async markFault(ledger, at) {
      faultAt = at ?? Date.now();
      before = ledger ?? (await ledgerNow(workdir, runId));
    },
    detected(at) {
      detectedAt = at ?? Date.now();
    },
  });
  const handleNow = rig.client.workflow.getHandle(runId);
  let outcome = 'completed';
  try {
    await handleNow.result();
    if (fc.expectFailure) throw new Error(`expected the run to fail matching ${fc.expectFailure}`);
  } catch (err) {
    if (!fc.expectFailure) throw err;
    let e = err as { message?: string; cause?: unknown };
    let msg = e.message ?? '';
    while (e.cause) {
      e = e.cause as typeof e;
      msg += ` ${e.message ?? ''}`;
    }
    expect(msg).toMatch(fc.expectFailure);
    outcome = 'stopped as asked';
  }
  const endedAt = Date.now();
  const facts = await gatherFacts(rig.client, workdir, runId);

  // Nothing launched twice; only the relaunches the fault explains.
  expect(duplicateLaunches(facts.launches)).toBe(0);
  if (!fc.expectFailure) expect(facts.launches).toEqual([...reference.launches, ...(fc.extraLaunches ?? [])].sort());
  // Finished stages are not redone.
  const redone = stagesRedone(before, facts.ledger);
  expect(redone).toEqual([]);
  for (const type of ['generateData', 'extractHiddenStates', 'trainDrafter']) expect(facts.scheduled[type] ?? 0).toBeLessThanOrEqual(1);
  // Same bytes as the uninterrupted run.
  const differing = fc.expectFailure ? [] : bytesDiffering(reference.outputs, facts.outputs);
  expect(differing).toEqual([]);
  // No orphans, nothing else signalled, no secrets in history.
  await waitUntil(async () => (await liveInGroups(await recordedGroups(workdir, runId))).length === 0 || undefined, 'the run to leave no live process', 60_000);
  expect(() => process.kill(decoy, 0)).not.toThrow();
  expect(facts.historyJson).not.toContain(SECRET);

  rows.push({
    case: fc.name,
    outcome,
    detectS: detectedAt ? ((detectedAt - faultAt) / 1000).toFixed(1) : '—',
    recoverS: ((endedAt - faultAt) / 1000).toFixed(1),
    redone: redone.length ? redone.join(', ') : 'none',
    duplicates: duplicateLaunches(facts.launches),
    differing: differing.length,
  });
}
