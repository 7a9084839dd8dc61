/**
 * What a run shows while it works: the stage board behind the status query and the Web UI's
 * current details, and the AerieStage search attribute. Entering a stage is the one place
 * that upserts the attribute, so the workflow's commands follow its stages.
 */
import { defineQuery, setCurrentDetails, setHandler, upsertSearchAttributes } from '@temporalio/workflow';
import type { RunStatus, StageName, StageStatus } from '../shared.js';
import { failureMessage } from './failure.js';
import { AerieStage } from './search-attributes.js';
import { renderStageMarkdown, StageBoard } from './status.js';

export const statusQuery = defineQuery<RunStatus>('status');

export class Progress {
  private readonly board: StageBoard;

  /** Registers the status query: call once, at the start of the workflow. */
  constructor(runId: string, label: string) {
    this.board = new StageBoard(runId, label);
    setHandler(statusQuery, () => this.board.snapshot());
  }

  /** The stage last entered: the one a failure belongs to. */
  get current(): StageName | undefined {
    return this.board.current;
  }

  stages(): StageStatus[] {
    return this.board.snapshot().stages;
  }

  enter(stage: StageName, note?: string): void {
    this.board.set(stage, 'running', note, now());
    upsertSearchAttributes([{ key: AerieStage, value: stage }]);
    this.show();
  }

  finish(stage: StageName, note: string, state: 'done' | 'skipped' = 'done'): void {
    this.board.set(stage, state, note, now());
    this.show();
  }

  /** Updates the running stage's note (a relaunch, a pass finished); nothing when no stage runs. */
  say(note: string): void {
    const stage = this.board.current;
    if (!stage || this.board.get(stage).state !== 'running') return;
    this.board.get(stage).note = note;
    this.show();
  }

  /** Marks the current stage failed and the run's error. */
  failed(err: unknown): void {
    const stage = this.board.current;
    if (stage) this.board.set(stage, 'failed', failureMessage(err), now());
    this.board.error = failureMessage(err);
    this.show();
  }

  waiting(stage: StageName, note: string): void {
    this.board.set(stage, 'waiting', note, now());
    this.show();
  }

  /** Back to pending from `stage` on, and the error cleared, for an operator's retry. */
  retrying(stage: StageName): void {
    this.board.reset(stage);
    this.board.error = undefined;
    this.show();
  }

  private show(): void {
    setCurrentDetails(renderStageMarkdown(this.board.snapshot()));
  }
}

/** Workflow time (Date is deterministic in the sandbox), for the board's timestamps. */
function now(): string {
  return new Date(Date.now()).toISOString();
}
