/**
 * Workers anywhere: a demo run whose host names a task queue (hosts.local.task-queue: site-b)
 * through a real dev server, a pipeline worker on the pipeline's queue and a site worker
 * (activities only) on site-b. The run's history says who ran what: every activity that touches
 * the host on the site worker, none on the pipeline worker; the workflow tasks and the GPU
 * lease's renewals on the pipeline worker.
 */
import { open } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { temporal } from '@temporalio/proto';
import { AERIE_HOME } from '../../src/config/load.js';
import { HostPool } from '../../src/hosts/index.js';
import { TASK_QUEUE, type PipelineInput, type PipelineResult } from '../../src/shared.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { createWorker } from '../../src/worker.js';
import { pipeline } from '../../src/workflows/index.js';
import { demoConfig } from '../support/demo-config.js';
import { run, signalGroup, useProcessGroups } from '../support/processes.js';
import { ALL_STAGES_DONE, stageStates } from '../support/stages.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-sites-');
// Registered after the suite, so its afterAll (SIGKILL by pgid) runs first: no site worker is
// left to relaunch what the suite then stops by its launch records.
const siteWorkers = useProcessGroups();
const SITE = 'site-b';

/** Only these talk to Temporal and not to the host: they stay on the pipeline's queue (workflows/leases.ts). */
const ON_PIPELINE_QUEUE = ['holdGpuLease', 'releaseGpuLease'];

interface Ran {
  type: string;
  queue: string;
  identity: string;
}

/** Each activity the run scheduled: its type, the queue it was scheduled on, who started it. */
function activitiesRan(events: temporal.api.history.v1.IHistoryEvent[]): Ran[] {
  const scheduled = new Map<string, { type: string; queue: string }>();
  const ran: Ran[] = [];
  for (const e of events) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s) scheduled.set(String(e.eventId), { type: s.activityType?.name ?? '', queue: s.taskQueue?.name ?? '' });
    const st = e.activityTaskStartedEventAttributes;
    if (st) ran.push({ ...scheduled.get(String(st.scheduledEventId))!, identity: st.identity ?? '' });
  }
  return ran;
}

describe('a host on its own task queue', () => {
  it('runs every activity that touches the host on the site worker, and the run completes', async () => {
    const workdir = join(suite.work, 'site-b');
    const config = demoConfig(workdir, await freePort(), (c) => {
      c.hosts.local!['task-queue'] = SITE;
      c.stages.benchmark.concurrencies = [1];
    });
    const runId = `sites-${Date.now()}`;
    const input: PipelineInput = { runId, config, configPath: 'test' };
    const siteHosts = new HostPool();
    const site = await createWorker({
      connection: suite.t.nativeConnection,
      taskQueue: SITE,
      activitiesOnly: true,
      hosts: siteHosts,
    });
    let result: PipelineResult;
    try {
      result = (await site.worker.runUntil(
        suite.t.withWorker(async () => {
          const handle = await suite.t.client.workflow.start(pipeline, {
            taskQueue: TASK_QUEUE,
            workflowId: runId,
            args: [input],
          });
          return handle.result();
        }),
      )) as PipelineResult;
    } finally {
      await siteHosts.closeAll();
    }
    expect(stageStates(result)).toEqual(ALL_STAGES_DONE);

    const events = (await suite.t.client.workflow.getHandle(runId).fetchHistory()).events ?? [];
    const siteIdentity = site.worker.options.identity;
    expect(siteIdentity).toMatch(new RegExp(` ${SITE}$`));
    const workflowTasks = events.flatMap((e) => e.workflowTaskStartedEventAttributes?.identity ?? []);
    const pipelineIdentity = workflowTasks[0]!;
    expect(pipelineIdentity).not.toBe(siteIdentity);
    // The site worker polls no workflow tasks: every one ran on the pipeline worker.
    expect(new Set(workflowTasks)).toEqual(new Set([pipelineIdentity]));

    const ran = activitiesRan(events);
    const onHost = ran.filter((r) => !ON_PIPELINE_QUEUE.includes(r.type));
    // Every stage's work is among them, each scheduled on site-b and started by the site worker.
    for (const type of ['acquireGpuLease', 'preflight', 'checkLedger', 'launchServer', 'awaitServerReady']) {
      expect(onHost.map((r) => r.type)).toContain(type);
    }
    for (const type of ['generateData', 'extractHiddenStates', 'trainDrafter', 'benchmarkSweep', 'writeReport']) {
      expect(onHost.map((r) => r.type)).toContain(type);
    }
    expect(onHost.filter((r) => r.queue !== SITE || r.identity !== siteIdentity)).toEqual([]);
    // The lease's renewals and release stayed with the workflow's worker.
    const leaseKeeping = ran.filter((r) => ON_PIPELINE_QUEUE.includes(r.type));
    expect(leaseKeeping.map((r) => r.type).sort()).toEqual([...ON_PIPELINE_QUEUE].sort());
    expect(leaseKeeping.every((r) => r.queue === TASK_QUEUE && r.identity === pipelineIdentity)).toBe(true);
  }, 300_000);
});

/** `aerie worker --task-queue site-b` as a user starts it on the site's machine; returns its pid (= pgid). */
async function startSiteWorker(name: string): Promise<number> {
  const log = await open(join(suite.work, `${name}.log`), 'a');
  const child = siteWorkers.start(
    process.execPath,
    [join(AERIE_HOME, 'bin', 'aerie.mjs'), 'worker', '--task-queue', SITE],
    {
      env: { ...process.env, TEMPORAL_ADDRESS: suite.t.server.address, TEMPORAL_NAMESPACE: 'default' },
      stdio: ['ignore', log.fd, log.fd],
    },
  );
  await log.close();
  return child.pid!;
}

const pidOf = (identity: string) => Number(/^(\d+)@/.exec(identity)?.[1]);

describe('a site worker SIGKILLed mid-activity', () => {
  it('costs one heartbeat timeout: the other site worker picks the activity up and the run completes', async () => {
    const heartbeatTimeout = 10_000;
    const workdir = join(suite.work, 'site-crash');
    const config = demoConfig(workdir, await freePort(), (c) => {
      c.hosts.local!['task-queue'] = SITE;
      c.run['heartbeat-timeout'] = heartbeatTimeout;
      c.stages.benchmark.concurrencies = [1];
      // Slow enough that the trainer outlives the heartbeat timeout after the kill.
      c.stages.train.env.AERIE_SIM_TIME_SCALE = '0.3';
    });
    const runId = `sites-crash-${Date.now()}`;
    const workers = [await startSiteWorker('site-1'), await startSiteWorker('site-2')];
    const result = (await suite.t.withWorker(async () => {
      const handle = await suite.t.client.workflow.start(pipeline, {
        taskQueue: TASK_QUEUE,
        workflowId: runId,
        args: [{ runId, config, configPath: 'test' } satisfies PipelineInput],
      });
      const training = await waitUntil(
        async () =>
          (await handle.describe()).raw.pendingActivities?.find(
            (a) => a.activityType?.name === 'trainDrafter' && a.lastWorkerIdentity,
          ),
        'a site worker to start training',
        240_000,
      );
      const victim = pidOf(training.lastWorkerIdentity!);
      expect(workers).toContain(victim);
      signalGroup(victim, 'SIGKILL'); // the fault: the site worker running the stage dies
      const killedAt = Date.now();
      return { result: (await handle.result()) as PipelineResult, victim, killedAt };
    }))!;
    expect(stageStates(result.result)).toEqual(ALL_STAGES_DONE);

    const events = (await suite.t.client.workflow.getHandle(runId).fetchHistory()).events ?? [];
    const trainId = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'trainDrafter')!;
    const started = events.find(
      (e) => String(e.activityTaskStartedEventAttributes?.scheduledEventId ?? '') === String(trainId.eventId),
    )!;
    const attrs = started.activityTaskStartedEventAttributes!;
    // One scheduling, a second attempt, on the surviving site worker.
    expect(
      events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'trainDrafter'),
    ).toHaveLength(1);
    expect(attrs.attempt).toBeGreaterThanOrEqual(2);
    const survivor = workers.find((w) => w !== result.victim)!;
    expect(pidOf(attrs.identity ?? '')).toBe(survivor);
    // The retry started after one heartbeat timeout (plus its 1 s backoff and the machine's load), not hours.
    const retriedAfter = Number(String(started.eventTime!.seconds)) * 1000 - result.killedAt;
    // Not before it either (the last heartbeat came at most a second before the kill; eventTime is in whole seconds).
    expect(retriedAfter).toBeGreaterThan(heartbeatTimeout - 2_000);
    expect(retriedAfter).toBeLessThan(2 * heartbeatTimeout + 1_000);
  }, 420_000);
});

describe('aerie worker --task-queue', () => {
  it('refuses a queue name no host could name, before reaching Temporal', async () => {
    const { code, stderr } = await run(
      process.execPath,
      [join(AERIE_HOME, 'bin', 'aerie.mjs'), 'worker', '--task-queue', 'site b'],
      {
        // Nothing listens here: the refusal must come before any connection attempt.
        env: { TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}` },
        timeoutMs: 50_000,
      },
    );
    expect(code).toBe(2);
    expect(stderr).toContain('aerie: --task-queue "site b" is not a task queue name: letters, digits');
    expect(stderr).toContain('(no spaces)');
  }, 60_000);
});
