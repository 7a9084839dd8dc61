/**
 * The pipeline workflow on a real Worker against stub activities, in @temporalio/testing's
 * local environment: the Temporal CLI set-up installed (.venv/bin/temporal, see
 * scripts/setup.sh), started by the SDK with an in-memory store and a free port, so nothing
 * is downloaded at test time. (The time-skipping server is a separate download: not used;
 * stub activities answer at once, so no test waits on a timer anyway.)
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { historyToJSON } from '@temporalio/common/lib/proto-utils.js';
import type { History } from '@temporalio/common/lib/proto-utils.js';
import type { WorkflowHandle } from '@temporalio/client';
import type { Activities } from '../../src/activities/index.js';
import type { Config } from '../../src/config/schema.js';
import { pipeline } from '../../src/workflows/index.js';
import type { StubActivities } from './stub-activities.js';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import {
  bundleWorkflowCode,
  DefaultLogger,
  Runtime,
  Worker,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import { SEARCH_ATTRIBUTES } from '../../src/shared.js';
import { afterAll, beforeAll } from 'vitest';
import { temporalBinary } from '../../src/temporal/dev-server.js';

/**
 * The workflow package the worker registers (src/workflows/index.ts, as src/worker.ts bundles
 * it). AERIE_TEST_WORKFLOWS_INDEX points it at another checkout's, only to record histories
 * from an older commit (test/fixtures/histories/README.md).
 */
export const WORKFLOWS_INDEX =
  process.env.AERIE_TEST_WORKFLOWS_INDEX ?? fileURLToPath(new URL('../../src/workflows/index.ts', import.meta.url));

/** Saves a workflow's history as the replay test reads it: historyToJSON, gzipped (payloads are base64, so gzip hides nothing readable). */
export async function saveHistory(handle: { fetchHistory(): Promise<History> }, path: string): Promise<number> {
  const history = await handle.fetchHistory();
  await writeFile(path, gzipSync(historyToJSON(history) + '\n', { level: 9 }));
  return history.events?.length ?? 0;
}

const noop = () => undefined;
const quietLogger = { log: noop, trace: noop, debug: noop, info: noop, warn: noop, error: noop };

let runtimeInstalled = false;
/**
 * Worker and SDK logs at ERROR: the tests fail activities on purpose, and each failure
 * would otherwise print a warning with a stack trace.
 */
export function quietWorkerLogs(): void {
  if (runtimeInstalled) return;
  Runtime.install({
    logger: new DefaultLogger('ERROR'),
    telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' } } },
  });
  runtimeInstalled = true;
}
quietWorkerLogs.logger = quietLogger;

export interface WorkflowEnv {
  env: TestWorkflowEnvironment;
  bundle: WorkflowBundleWithSourceMap;
  /**
   * fn with a Worker on its own task queue, registering the given activities (`{}` for a
   * workflow-only worker; a function of the queue for activities that must know it, as the
   * lease activities do); stopped after.
   */
  withWorker<T>(activities: WorkerActivities, fn: (taskQueue: string) => Promise<T>): Promise<T>;
  /**
   * The pipeline for runId on a fresh worker with these stubs; fn gets its handle. With
   * AERIE_RECORD_HISTORIES=<dir>, a run given a record name saves its history there as <record>.json.gz.
   */
  runPipeline<T>(
    stubs: StubActivities,
    run: { runId: string; config: Config; record?: string },
    fn: (h: PipelineHandle) => Promise<T>,
  ): Promise<T>;
  stop(): Promise<void>;
}

/** Activities a test worker registers: the pipeline's, the lease workflow's, or none. */
export type WorkerActivities = Activities | object | ((taskQueue: string) => object);

let queues = 0;
let runs = 0;

export type PipelineHandle = WorkflowHandle<typeof pipeline>;

export async function startWorkflowEnv(): Promise<WorkflowEnv> {
  quietWorkerLogs();
  const [env, bundle] = await Promise.all([
    TestWorkflowEnvironment.createLocal({
      server: {
        executable: { type: 'existing-path', path: temporalBinary() },
        ip: '127.0.0.1',
        // The workflow upserts AerieStage: the server must know the keys (as aerie's own dev server does).
        searchAttributes: Object.keys(SEARCH_ATTRIBUTES).map((name) =>
          defineSearchAttributeKey(name, SearchAttributeType.KEYWORD),
        ),
        log: { format: 'pretty', level: 'error' },
      },
    }),
    bundleWorkflowCode({ workflowsPath: WORKFLOWS_INDEX, logger: quietLogger }),
  ]);
  const self: WorkflowEnv = {
    env,
    bundle,
    async withWorker<T>(activities: WorkerActivities, fn: (taskQueue: string) => Promise<T>): Promise<T> {
      const taskQueue = `wf-test-${process.pid}-${++queues}`;
      const worker = await Worker.create({
        connection: env.nativeConnection,
        namespace: env.namespace ?? 'default',
        taskQueue,
        workflowBundle: bundle,
        activities: typeof activities === 'function' ? activities(taskQueue) : activities,
        // A cancelled activity hears of it on its next heartbeat: send them at once.
        maxHeartbeatThrottleInterval: '50ms',
        defaultHeartbeatThrottleInterval: '50ms',
        // A workflow that throws (a TypeError, a nondeterminism) fails at once instead of
        // retrying its task every minute, so a broken pipeline.ts fails the test with its error.
        workflowFailureErrorTypes: { '*': ['Error'] },
      });
      return worker.runUntil(fn(taskQueue));
    },
    runPipeline(stubs, { runId, config, record }, fn) {
      return self.withWorker(stubs.activities(), async (taskQueue) => {
        const handle = await env.client.workflow.start(pipeline, {
          taskQueue,
          workflowId: `${runId}-wf${++runs}`,
          args: [{ runId, config, configPath: 'test' }],
        });
        const out = await fn(handle);
        const dir = process.env.AERIE_RECORD_HISTORIES;
        if (dir && record) await saveHistory(handle, join(dir, `${record}.json.gz`));
        return out;
      });
    },
    async stop() {
      await env.teardown();
    },
  };
  return self;
}

/**
 * A test file's workflow environment: started in beforeAll, stopped in afterAll, read inside
 * a hook or test (before beforeAll has run, every member throws).
 */
export function useWorkflowEnv(): WorkflowEnv {
  let w: WorkflowEnv | undefined;
  beforeAll(async () => {
    w = await startWorkflowEnv();
  }, 60_000);
  afterAll(async () => {
    await w?.stop();
  });
  const ready = (): WorkflowEnv => {
    if (!w) throw new Error('useWorkflowEnv: the environment is made in beforeAll; read it inside a hook or test');
    return w;
  };
  return {
    get env() {
      return ready().env;
    },
    get bundle() {
      return ready().bundle;
    },
    withWorker: (activities, fn) => ready().withWorker(activities, fn),
    runPipeline: (stubs, run, fn) => ready().runPipeline(stubs, run, fn),
    stop: () => ready().stop(),
  };
}
