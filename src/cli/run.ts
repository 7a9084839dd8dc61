/**
 * `aerie run` and `aerie resume`: start (or restart) the pipeline workflow, run a worker
 * in-process unless told not to, follow the run, and leave a local run folder.
 */
import { mkdir, copyFile, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { loadConfigFile } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { TASK_QUEUE, type PipelineInput, type PipelineResult } from '../shared.js';
import { resolveTemporal, webUiUrl, type TemporalTarget } from '../temporal/connect.js';
import { reachTemporal } from './reach.js';
import { installFileLogRuntime } from '../worker.js';
import { AerieLabel, AerieStage, AerieTarget, pipeline } from '../workflows/index.js';
import { followRun } from './follow-run.js';
import { withLocalWorker } from './local-worker.js';
import { copyReportFiles } from './report.js';
import { failureTypeOf, fixLine, lastActivityFailureType } from './failure-fix.js';
import { failureMessage } from '../workflows/failure.js';
import { localRunFolder, shownPath, workerLogPath } from './run-folder.js';

export { localRunFolder } from './run-folder.js';

export function newRunId(label: string, now = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  const rand = Math.random().toString(36).slice(2, 6);
  return `${label}-${stamp}-${rand}`;
}

/**
 * A target host on a task queue of its own is served only by site workers (README "Workers
 * anywhere"): this terminal's worker runs the workflow, not those activities, so without a
 * site worker the run waits at its first host activity. Said once, at the start.
 */
export function siteWorkerNote(config: Pick<Config, 'hosts' | 'target'>): string {
  const host = config.target.host;
  const queue = config.hosts[host]?.['task-queue'];
  return queue
    ? `activities for host ${host} go to task queue ${queue} (hosts.${host}.task-queue): start \`aerie worker --task-queue ${queue}\` on a machine that reaches ${host}; until one polls it the run waits\n`
    : '';
}

export interface RunOptions {
  worker: boolean;
  out?: NodeJS.WriteStream;
}

async function startWorkflow(client: Client, input: PipelineInput): Promise<void> {
  const { config, runId } = input;
  await client.workflow.start(pipeline, {
    taskQueue: TASK_QUEUE,
    workflowId: runId,
    args: [input],
    typedSearchAttributes: [
      { key: AerieStage, value: 'preflight' },
      { key: AerieTarget, value: basename(config.target['model-path']) },
      { key: AerieLabel, value: config.run.label },
    ],
    staticSummary: `EAGLE-3 drafter for ${basename(config.target['model-path'])} on ${config.target.host} (${config.run.label})`,
    staticDetails: [
      `**target** \`${config.target['model-path']}\` on \`${config.target.host}\``,
      `**deploy** ${config.stages.deploy['speculative-algorithm']}, benchmark at ${config.stages.benchmark.concurrencies.join(', ')}`,
      `**config** \`${input.configPath}\``,
    ].join('\n\n'),
  });
}

/** Run the workflow to its end with an in-process worker (or just follow it). Returns the exit code. */
export async function attach(target: TemporalTarget, client: Client, runId: string, opts: RunOptions): Promise<number> {
  const out = opts.out ?? process.stdout;
  const ui = webUiUrl(target, runId);
  // Before the worker (and the SDK's Runtime) exists: every log line it makes goes to the file.
  const log = opts.worker ? installFileLogRuntime(workerLogPath(runId)) : undefined;
  out.write(`run ${runId}\n${ui ? `Web UI: ${ui}\n` : ''}${log ? `worker log: ${shownPath(log)}\n` : ''}\n`);
  const details = log ? `details: ${shownPath(log)}\n` : '';
  const follow = async (): Promise<number> => {
    const end = await followRun(client, runId, out);
    if (end.state === 'waiting') {
      const fix = fixLine(await lastActivityFailureType(client.workflow.getHandle(runId)).catch(() => undefined));
      out.write(
        `\nrun ${runId} is waiting for an operator: ${end.error ?? 'see the failed stage above'}\n${fix}${details}` +
          `after fixing the cause: aerie retry ${runId} [--stage S]    or stop it: aerie cancel ${runId}\n`,
      );
      return 1;
    }
    try {
      const result = (await client.workflow.getHandle(runId).result()) as PipelineResult;
      await saveRunFolder(runId, result);
      if (result.report) {
        // The report lives with the run on its host; a copy lands in the local run folder.
        const { config } = await originalInput(client, runId);
        const local = await copyReportFiles(localRunFolder(runId), config, result.report).catch(() => []);
        if (local.length) result.report.paths = [...local];
      }
      if (result.report) out.write(`\n${result.report.table}\n\nreport: ${result.report.paths.join(', ')}\n`);
      out.write(`\nrun ${runId} finished${ui ? ` — ${ui}` : ''}\n`);
      return 0;
    } catch (err) {
      const reason = err instanceof WorkflowFailedError ? failureMessage(err) : (err as Error).message;
      const cancelled =
        err instanceof WorkflowFailedError &&
        /cancel/i.test(String(err.cause?.name ?? '') + String(err.cause?.message ?? ''));
      out.write(
        cancelled
          ? `\nrun ${runId} cancelled\n`
          : `\nrun ${runId} failed: ${reason}\n${fixLine(failureTypeOf(err))}${details}resume after fixing the cause: aerie resume ${runId}\n`,
      );
      return 1;
    }
  };
  return opts.worker ? withLocalWorker(target, follow) : follow();
}

export async function runCommand(configPath: string, opts: RunOptions): Promise<number> {
  const path = resolve(configPath);
  const config = await loadConfigFile(path);
  const runId = newRunId(config.run.label);
  const target = await resolveTemporal();
  const client = await reachTemporal(target);
  const folder = localRunFolder(runId);
  await mkdir(folder, { recursive: true });
  await copyFile(path, join(folder, 'config.yaml'));
  await startWorkflow(client, { runId, config, configPath: path });
  (opts.out ?? process.stdout).write(siteWorkerNote(config));
  try {
    return await attach(target, client, runId, opts);
  } finally {
    await client.connection.close();
  }
}

export async function resumeCommand(runId: string, opts: RunOptions & { configPath?: string }): Promise<number> {
  const target = await resolveTemporal();
  const client = await reachTemporal(target);
  const out = opts.out ?? process.stdout;
  try {
    const handle = client.workflow.getHandle(runId);
    const desc = await handle.describe();
    if (desc.status.name === 'RUNNING') {
      out.write(`run ${runId} is still running: attaching${opts.worker ? ' with a worker' : ''}\n`);
      return await attach(target, client, runId, opts);
    }
    if (desc.status.name === 'COMPLETED' && !opts.configPath) {
      out.write(`run ${runId} already completed; nothing to resume\n`);
      return 0;
    }
    const original = await originalInput(client, runId);
    const config: Config = opts.configPath ? await loadConfigFile(resolve(opts.configPath)) : original.config;
    out.write(
      `run ${runId} ended ${desc.status.name.toLowerCase()}: restarting it; stages whose ledger records are valid are skipped\n`,
    );
    await startWorkflow(client, {
      ...original,
      config,
      configPath: opts.configPath ? resolve(opts.configPath) : original.configPath,
    });
    out.write(siteWorkerNote(config));
    return await attach(target, client, runId, opts);
  } finally {
    await client.connection.close();
  }
}

/** The input the run was first started with, from its history. */
async function originalInput(client: Client, runId: string): Promise<PipelineInput> {
  const history = await client.workflow.getHandle(runId).fetchHistory();
  const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
  const payload = started?.input?.payloads?.[0];
  if (!payload) throw new Error(`cannot find the input of run ${runId} in its history`);
  return defaultPayloadConverter.fromPayload(payload) as PipelineInput;
}

async function saveRunFolder(runId: string, result: PipelineResult): Promise<void> {
  const folder = localRunFolder(runId);
  await mkdir(folder, { recursive: true });
  await writeFile(join(folder, 'result.json'), JSON.stringify(result, null, 2));
  if (result.report) await writeFile(join(folder, 'report.md'), result.report.markdown);
}
