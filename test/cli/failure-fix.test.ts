// The "what to do" line under a failed or waiting run comes from src/failures.ts, found by the
// failure's type in an error chain or in a recorded history.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { ApplicationFailure, ActivityFailure, RetryState } from '@temporalio/common';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils.js';
import { describe, expect, it } from 'vitest';
import { FAILURES } from '../../src/failures.js';
import { failureTypeOf, fixLine, lastActivityFailureTypeIn } from '../../src/cli/failure-fix.js';

const history = (file: string) =>
  historyFromJSON(
    JSON.parse(gunzipSync(readFileSync(new URL(`../fixtures/histories/${file}`, import.meta.url))).toString('utf8')),
  );

describe('failure fix text', () => {
  it('finds the declared type under the wrappers of a failed workflow', () => {
    const app = ApplicationFailure.nonRetryable('preflight found 1 problem', 'PreflightFailed');
    const act = new ActivityFailure('activity failed', 'preflight', '1', RetryState.NON_RETRYABLE_FAILURE, 'id', app);
    const outer = Object.assign(new Error('Workflow execution failed'), { cause: act });
    expect(failureTypeOf(outer)).toBe('PreflightFailed');
    expect(fixLine(failureTypeOf(outer))).toBe(`what to do: ${FAILURES.PreflightFailed.fix}\n`);
  });

  it('prints nothing for a type aerie does not declare', () => {
    const err = Object.assign(new Error('x'), { cause: ApplicationFailure.retryable('socket hang up', 'Error') });
    expect(failureTypeOf(err)).toBeUndefined();
    expect(fixLine(failureTypeOf(err))).toBe('');
  });

  it("reads a waiting run's failure from the last failed activity in its history", () => {
    // decision-force: train failed (TrainerFailed, from a stub) with run.on-failure: wait, then the operator retried.
    const events = history('decision-force.json.gz').events ?? [];
    expect(lastActivityFailureTypeIn(events)).toBe('TrainerFailed');
    // A history without an activity failure has nothing to say.
    expect(lastActivityFailureTypeIn(history('demo-full.json.gz').events ?? [])).toBeUndefined();
  });
});
