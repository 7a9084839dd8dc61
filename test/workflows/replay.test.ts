/**
 * Workflows already running when the code changes must keep running: each recorded history
 * (test/fixtures/histories/, see its README) is replayed against the current workflow code.
 * A change that reorders, adds or drops a command (an activity, a timer, a search-attribute
 * upsert) where a recorded run took a path fails here with the SDK's DeterminismViolationError.
 * Needs no server: replay runs the workflow in the worker's sandbox against the history alone.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { bundleWorkflowCode, Worker, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { beforeAll, describe, expect, it } from 'vitest';
import { pipeline } from '../../src/workflows/index.js';
import { quietWorkerLogs, WORKFLOWS_INDEX } from '../support/workflow-env.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));
const histories = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.json.gz'))
  .sort();

function load(file: string) {
  return historyFromJSON(JSON.parse(gunzipSync(readFileSync(FIXTURES + file)).toString('utf8')));
}

/** The workflow type the runs were started as: the exported function's name, which must not change. */
const RECORDED_TYPE = 'pipeline';

let bundle: WorkflowBundleWithSourceMap;

beforeAll(async () => {
  quietWorkerLogs();
  bundle = await bundleWorkflowCode({ workflowsPath: WORKFLOWS_INDEX, logger: quietWorkerLogs.logger });
}, 60_000);

describe('recorded pipeline histories replay on the current workflow code', () => {
  it('has fixtures to replay, each a pipeline run that closed', () => {
    expect(histories.length).toBeGreaterThanOrEqual(2);
    // Renaming the exported workflow function would orphan every running workflow.
    expect(pipeline.name).toBe(RECORDED_TYPE);
    for (const f of histories) {
      const events = load(f).events ?? [];
      expect(events[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name, f).toBe(RECORDED_TYPE);
      // Completed, failed (given up) or cancelled: a history that ends open would replay only its start.
      const last = events.at(-1) ?? {};
      const closing = (
        [
          'workflowExecutionCompletedEventAttributes',
          'workflowExecutionFailedEventAttributes',
          'workflowExecutionCanceledEventAttributes',
        ] as const
      ).filter((k) => last[k] != null);
      expect(closing, f).toHaveLength(1);
    }
  });

  it.each(histories)('%s', async (file) => {
    // Rejects with DeterminismViolationError (or the workflow's own error) when the code diverges.
    await expect(
      Worker.runReplayHistory({ workflowBundle: bundle, replayName: file }, load(file), file),
    ).resolves.toBeUndefined();
  });
});
