/**
 * The "what to do" line under a failed or waiting run: the fix text src/failures.ts declares
 * for the failure's type, so a researcher reads the remedy where the reason is printed
 * instead of looking it up. A failure of a type aerie does not declare (an SSH drop escaping
 * an activity, a workflow bug) gets no line: a guessed remedy would be worse than none.
 */
import type { WorkflowHandle } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';
import { FAILURES, type FailureType } from '../failures.js';

function isFailureType(name: unknown): name is FailureType {
  return typeof name === 'string' && Object.prototype.hasOwnProperty.call(FAILURES, name);
}

/**
 * The declared type nearest the root cause in an error's cause chain (WorkflowFailedError →
 * ActivityFailure → ApplicationFailure, or an ApplicationFailure the workflow threw itself).
 */
export function failureTypeOf(err: unknown): FailureType | undefined {
  let found: FailureType | undefined;
  for (let e = err as { type?: unknown; cause?: unknown } | undefined; e; e = e.cause as typeof e) {
    if (isFailureType(e.type)) found = e.type;
  }
  return found;
}

/** The same, read from a failure as history records it (an activity's last failure). */
export function failureTypeOfProto(
  failure: temporal.api.failure.v1.IFailure | null | undefined,
): FailureType | undefined {
  let found: FailureType | undefined;
  for (let f = failure; f; f = f.cause) {
    const type = f.applicationFailureInfo?.type;
    if (isFailureType(type)) found = type;
  }
  return found;
}

/** `what to do: …` for a declared type, with a newline; empty for anything else. */
export function fixLine(type: FailureType | undefined): string {
  return type ? `what to do: ${FAILURES[type].fix}\n` : '';
}

/**
 * A waiting run has not failed as a workflow: the failure it waits on is the last activity
 * failure in its history. Read once, when the run stops to wait; undefined when there is none.
 */
export async function lastActivityFailureType(handle: WorkflowHandle): Promise<FailureType | undefined> {
  return lastActivityFailureTypeIn((await handle.fetchHistory()).events ?? []);
}

export function lastActivityFailureTypeIn(events: temporal.api.history.v1.IHistoryEvent[]): FailureType | undefined {
  for (let i = events.length - 1; i >= 0; i--) {
    const failure = events[i]!.activityTaskFailedEventAttributes?.failure;
    if (failure) return failureTypeOfProto(failure);
  }
  return undefined;
}
