/**
 * `aerie report <run>`: the benchmark table and where the report files are. The local run
 * folder (.aerie/runs/<run>/) answers when it has them; otherwise the finished workflow's
 * result says where they are on the host, and they are copied into the local folder
 * through the Host interface (the host may be remote).
 */
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { defaultPayloadConverter } from '@temporalio/common';
import { readResultsJsonl, REPORT_FILES } from '../bench/report-files.js';
import { renderReportTable } from '../bench/report.js';
import type { Config } from '../config/schema.js';
import { HostPool } from '../hosts/index.js';
import type { PipelineInput, PipelineResult } from '../shared.js';
import { resolveTemporal } from '../temporal/connect.js';
import { reachTemporal } from './reach.js';
import { localRunFolder } from './run-folder.js';

/** What a finished run says about its report (writeReport's result, kept in PipelineResult.report). */
export interface RunReportRef {
  table: string;
  /** report.md, report.html, results.jsonl on the host. */
  paths: string[];
  markdown?: string;
  host?: string;
}

/** A run as the CLI sees it through Temporal. */
export interface RunLookup {
  status: string;
  result?: PipelineResult;
  config?: Config;
  /** One line on what is running now, for a run not finished yet. */
  phase?: string;
}

export interface ReportCommandOptions {
  out?: { write(s: string): unknown };
  /** Run folder; default .aerie/runs/<run>. */
  folder?: string;
  /** How to find a run that the local folder knows nothing about (default: ask Temporal). */
  lookup?: (runId: string) => Promise<RunLookup>;
  hosts?: HostPool;
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  );
}

/**
 * Copy the report files from the host into the local run folder; returns the local paths.
 * Also what `aerie run` should call when a run finishes.
 */
export async function copyReportFiles(
  folder: string,
  config: Config,
  report: Pick<RunReportRef, 'paths'>,
  hosts = new HostPool(),
): Promise<string[]> {
  const host = hosts.get(config);
  await mkdir(folder, { recursive: true });
  const local: string[] = [];
  for (const path of report.paths) {
    const name = path.slice(path.lastIndexOf('/') + 1);
    const data = await host.readFile(path);
    await writeFile(join(folder, name), data);
    local.push(join(folder, name));
  }
  return local;
}

function printReport(
  out: NonNullable<ReportCommandOptions['out']>,
  table: string,
  local: string[],
  hostName: string | undefined,
  hostPaths: string[],
): void {
  out.write(`${table.trimEnd()}\n\n`);
  const width = Math.max(...REPORT_FILES.map((f) => f.length));
  if (local.length > 0) {
    out.write('report (local copy):\n');
    for (const p of local) out.write(`  ${p.slice(p.lastIndexOf('/') + 1).padEnd(width)}  ${p}\n`);
  }
  if (hostPaths.length > 0) {
    out.write(`on host ${hostName ?? '?'}:\n`);
    for (const p of hostPaths) out.write(`  ${p.slice(p.lastIndexOf('/') + 1).padEnd(width)}  ${p}\n`);
  }
}

async function readLocalResult(folder: string): Promise<PipelineResult | undefined> {
  try {
    return JSON.parse(await readFile(join(folder, 'result.json'), 'utf8')) as PipelineResult;
  } catch {
    return undefined;
  }
}

/** The table from the local results.jsonl when result.json does not carry it. */
async function tableFromResults(folder: string, runId: string): Promise<string> {
  const { baseline, speculative } = readResultsJsonl(await readFile(join(folder, 'results.jsonl'), 'utf8'));
  return renderReportTable({
    title: `aerie run ${runId}`,
    baseline: baseline.length > 0 ? baseline : undefined,
    speculative,
  });
}

export async function reportCommand(runId: string, opts: ReportCommandOptions = {}): Promise<number> {
  const out = opts.out ?? process.stdout;
  const folder = opts.folder ?? localRunFolder(runId);
  const localFiles = async () => {
    const found: string[] = [];
    for (const f of REPORT_FILES) if (await exists(join(folder, f))) found.push(join(folder, f));
    return found;
  };

  const saved = await readLocalResult(folder);
  const savedReport = saved?.report as RunReportRef | undefined;
  if (await exists(join(folder, 'results.jsonl'))) {
    const table = savedReport?.table ?? (await tableFromResults(folder, runId));
    printReport(out, table, await localFiles(), savedReport?.host, savedReport?.paths ?? []);
    return 0;
  }

  const run = await (opts.lookup ?? lookupRun)(runId);
  if (run.status !== 'COMPLETED') {
    if (run.status === 'RUNNING')
      out.write(
        `run ${runId} is running${run.phase ? `: ${run.phase}` : ''}\nthe report is written when the benchmark stage finishes\n`,
      );
    else out.write(`run ${runId} ended ${run.status.toLowerCase().replace(/_/g, ' ')} without a report\n`);
    return run.status === 'RUNNING' ? 0 : 1;
  }
  const report = run.result?.report as RunReportRef | undefined;
  if (!report) {
    out.write(`run ${runId} finished without a benchmark report\n`);
    return 1;
  }
  let local: string[] = [];
  if (run.config) {
    const hosts = opts.hosts ?? new HostPool();
    try {
      local = await copyReportFiles(folder, run.config, report, hosts);
      await writeFile(join(folder, 'result.json'), JSON.stringify(run.result, null, 2));
    } catch (err) {
      out.write(
        `could not copy the report from host ${report.host ?? run.config.target.host}: ${(err as Error).message}\n`,
      );
    } finally {
      if (!opts.hosts) await hosts.closeAll();
    }
  }
  printReport(out, report.table, local, report.host ?? run.config?.target.host, report.paths);
  return 0;
}

/** The run's status, result and config (the input it was last started with) from Temporal. */
export async function lookupRun(runId: string): Promise<RunLookup> {
  const client = await reachTemporal(await resolveTemporal());
  try {
    const handle = client.workflow.getHandle(runId);
    const desc = await handle.describe();
    const status = desc.status.name;
    const history = await handle.fetchHistory();
    const payload = history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
    const config = payload ? (defaultPayloadConverter.fromPayload(payload) as PipelineInput).config : undefined;
    if (status !== 'COMPLETED') {
      const { pendingActivities } = await import('./follow-run.js');
      const { describePending } = await import('./phase.js');
      const pending = await pendingActivities(handle).catch(() => []);
      return { status, config, phase: describePending(pending) };
    }
    return { status, config, result: (await handle.result()) as PipelineResult };
  } finally {
    await client.connection.close();
  }
}
