/**
 * One run's workflow-side state, handed to every step: what it was started with, its board,
 * the operator's retry, its live servers and the activity options for its heartbeat timeout and
 * its target host's task queue.
 */
import { patched } from '@temporalio/workflow';
import type { RunRef } from '../activities/context.js';
import type { Config } from '../config/schema.js';
import type { PipelineInput } from '../shared.js';
import { heartbeatingActivities, hostTaskQueue, type HeartbeatingActivities } from './activities.js';
import { Operator } from './operator.js';
import { Progress } from './progress.js';
import { Servers } from './servers.js';

export interface Run {
  runId: string;
  config: Config;
  /** What every activity gets first: the run and its config. */
  base: RunRef;
  /** host:port of the model server, for summaries. */
  target: string;
  /** Options of every activity that touches the target host: on its task queue when it names one. */
  options: HeartbeatingActivities;
  /**
   * The same on the pipeline's queue, for activities that talk only to Temporal (the GPU lease's
   * renewals): they live as long as the run's workflow worker, whatever becomes of a site's.
   */
  pipelineOptions: HeartbeatingActivities;
  /** A cancel waits for the activities that own processes to stop them (heartbeatingActivities). */
  waitForCleanup: boolean;
  progress: Progress;
  operator: Operator;
  servers: Servers;
}

/** Sets up a run's state and registers its query and update handlers; call once, first thing. */
export function openRun({ runId, config }: PipelineInput): Run {
  const progress = new Progress(runId, config.run.label);
  const operator = new Operator(runId);
  const base = { runId, config };
  // Histories started before the setting existed carry configs without it: the old 30 s.
  const waitForCleanup = patched('cancel-waits-for-jobs');
  const pipelineOptions = heartbeatingActivities(config.run['heartbeat-timeout'], undefined, waitForCleanup);
  const options = heartbeatingActivities(config.run['heartbeat-timeout'], hostTaskQueue(config), waitForCleanup);
  const target = `${config.target.host}:${config.server.port}`;
  const run: Omit<Run, 'servers'> = {
    runId,
    config,
    base,
    target,
    options,
    pipelineOptions,
    waitForCleanup,
    progress,
    operator,
  };
  return { ...run, servers: new Servers(run) };
}
