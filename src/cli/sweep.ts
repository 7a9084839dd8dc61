/**
 * `aerie sweep <config.yaml> --vary <path>=a,b [--vary …]`: the variants of one config as child
 * runs of one `drafterSweep` workflow (src/workflows/drafter-sweep.ts), the stages they share
 * computed once; followed here child by child, then one report over the variants' run folders
 * in .aerie/sweeps/<sweep>/ (sweep.md, sweep.html).
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { WorkflowFailedError, type Client, type WorkflowHandle } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { HostPool } from '../hosts/index.js';
import { TASK_QUEUE, type PipelineResult } from '../shared.js';
import { resolveTemporal, webUiUrl, type TemporalTarget } from '../temporal/connect.js';
import { installFileLogRuntime } from '../worker.js';
import { failureMessage } from '../workflows/failure.js';
import {
  AerieLabel,
  AerieTarget,
  drafterSweep,
  sweepStatusQuery,
  type SweepInput,
  type SweepResult,
  type SweepStatus,
} from '../workflows/index.js';
import { loadRunView } from './compare.js';
import { withLocalWorker } from './local-worker.js';
import { queryStatus } from './follow-run.js';
import { reachTemporal } from './reach.js';
import { copyReportFiles } from './report.js';
import { localRunFolder, shownPath } from './run-folder.js';
import { newRunId, siteWorkerNote } from './run.js';
import { sweepFolder, sweepWorkflowId } from './sweep-ids.js';
import { shareDecision, type ShareDecision } from './sweep-share.js';
import { buildSweepReport, renderSweepHtml, renderSweepMarkdown, type SweepVariantView } from './sweep-report.js';
import { buildVariants, parseVary, SweepError, type Variant } from './sweep-variants.js';

export interface SweepOptions {
  worker: boolean;
  out?: { write(s: string): unknown };
}

/** The parent's input: run ids per variant, and the shared run when the decision shares anything. */
export function sweepInput(
  sweepId: string,
  configPath: string,
  variants: readonly Variant[],
  decision: ShareDecision,
): SweepInput {
  const first = variants[0]!.config;
  return {
    sweepId,
    configPath,
    ...(decision.until
      ? {
          shared: {
            runId: `${sweepId}-shared`,
            until: decision.until,
            // The baseline is each variant's (its benchmark settings may differ): not measured on the shared generate server.
            config: {
              ...first,
              stages: { ...first.stages, benchmark: { ...first.stages.benchmark, 'reuse-generate-server': false } },
            },
          },
        }
      : {}),
    variants: variants.map((v, i) => ({ label: v.label, runId: `${sweepId}-v${i + 1}`, config: v.config })),
  };
}

export async function sweepCommand(
  configPath: string,
  varyArgs: readonly string[],
  opts: SweepOptions,
): Promise<number> {
  const out = opts.out ?? process.stdout;
  const path = resolve(configPath);
  let variants: Variant[];
  try {
    variants = buildVariants(await readFile(path, 'utf8'), varyArgs.map(parseVary), path);
  } catch (err) {
    if (err instanceof SweepError) {
      out.write(`aerie sweep: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const decision = shareDecision(variants.map((v) => v.config));
  const sweepId = newRunId(variants[0]!.config.run.label);
  const input = sweepInput(sweepId, path, variants, decision);
  const folder = sweepFolder(sweepId);
  await mkdir(folder, { recursive: true });
  for (const [i, v] of input.variants.entries()) {
    await mkdir(localRunFolder(v.runId), { recursive: true });
    await writeFile(join(localRunFolder(v.runId), 'config.yaml'), variants[i]!.yaml);
  }
  if (input.shared) {
    await mkdir(localRunFolder(input.shared.runId), { recursive: true });
    await writeFile(join(localRunFolder(input.shared.runId), 'config.yaml'), variants[0]!.yaml);
  }
  await writeFile(join(folder, 'sweep.json'), JSON.stringify({ ...input, decision }, null, 2));

  const target = await resolveTemporal();
  const client = await reachTemporal(target);
  try {
    const model = variants[0]!.config.target['model-path'];
    await client.workflow.start(drafterSweep, {
      taskQueue: TASK_QUEUE,
      workflowId: sweepWorkflowId(sweepId),
      args: [input],
      typedSearchAttributes: [
        { key: AerieTarget, value: basename(model) },
        { key: AerieLabel, value: variants[0]!.config.run.label },
      ],
      staticSummary: `drafter sweep for ${basename(model)}: ${variants.map((v) => v.label).join(' | ')}`,
      staticDetails: [
        `**config** \`${path}\``,
        `**variants** ${input.variants.map((v) => `\`${v.label}\` → ${v.runId}`).join(', ')}`,
        `**shared** ${decision.reason}${input.shared ? ` (run ${input.shared.runId})` : ''}`,
      ].join('\n\n'),
    });
    const ui = webUiUrl(target, sweepWorkflowId(sweepId));
    out.write(
      `sweep ${sweepId} (workflow ${sweepWorkflowId(sweepId)})\n${ui ? `Web UI: ${ui}\n` : ''}` +
        `shared: ${decision.reason}${input.shared ? ` — run ${input.shared.runId}` : ''}\n` +
        input.variants.map((v) => `variant ${v.label}: run ${v.runId}\n`).join('') +
        siteWorkerNote(variants[0]!.config) +
        '\n',
    );
    const follow = () => followSweep(client, input, variants, decision, out);
    return opts.worker ? await withWorker(target, sweepId, out, follow) : await follow();
  } finally {
    await client.connection.close();
  }
}

/**
 * `aerie cancel <sweep>`: cancels the parent, which cancels every child; a worker runs here
 * (unless --no-worker) so the children stop their servers and jobs, and each child's end is printed.
 */
export async function sweepCancelCommand(id: string, opts: SweepOptions): Promise<number> {
  const out = opts.out ?? process.stdout;
  const sweepId = id.replace(/^aerie-sweep-/, '');
  const target = await resolveTemporal();
  const client = await reachTemporal(target);
  try {
    const handle = client.workflow.getHandle(sweepWorkflowId(sweepId));
    const { variants, shared } = (await handle.query(sweepStatusQuery).catch(() => undefined)) ?? { variants: [] };
    await handle.cancel();
    out.write(`cancel requested for sweep ${sweepId}; each of its runs stops what it launched\n`);
    const wait = async () => {
      await handle.result().catch(() => undefined);
      for (const c of [...(shared ? [shared] : []), ...variants]) {
        const end = await client.workflow
          .getHandle(c.runId)
          .result()
          .then(
            () => 'completed',
            (err: unknown) => failureMessage(err),
          );
        out.write(`  ${c.label} [${c.runId}]: ${end}\n`);
      }
      return 0;
    };
    return opts.worker ? await withWorker(target, sweepId, out, wait) : await wait();
  } finally {
    await client.connection.close();
  }
}

/** An in-process worker for the sweep's workflows and activities; its logs go to the sweep's folder, not the terminal. */
async function withWorker(
  target: TemporalTarget,
  sweepId: string,
  out: { write(s: string): unknown },
  fn: () => Promise<number>,
): Promise<number> {
  const log = installFileLogRuntime(join(sweepFolder(sweepId), 'worker.log'));
  out.write(`worker log: ${shownPath(log)}\n`);
  return withLocalWorker(target, fn);
}

/** One line per change: a child's state, or the stage a running child is in. */
async function followSweep(
  client: Client,
  input: SweepInput,
  variants: readonly Variant[],
  decision: ShareDecision,
  out: { write(s: string): unknown },
): Promise<number> {
  const { sweepId } = input;
  const handle = client.workflow.getHandle(sweepWorkflowId(sweepId));
  let done = false;
  const result = (handle.result() as Promise<SweepResult>).finally(() => (done = true));
  result.catch(() => undefined);
  const seen = new Map<string, string>();
  while (!done) {
    const status = await handle.query(sweepStatusQuery).catch(() => undefined);
    if (status) await printChanges(client, status, seen, out);
    await Promise.race([result.catch(() => undefined), new Promise((r) => setTimeout(r, 1000))]);
  }
  let final: SweepResult;
  try {
    final = await result;
  } catch (err) {
    if (err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure) {
      out.write(`\nsweep ${sweepId} cancelled\n`);
      return 1;
    }
    const status = await handle.query(sweepStatusQuery).catch(() => undefined);
    if (status) await printChanges(client, status, seen, out);
    const what =
      status?.shared?.state === 'failed' ? ` (the shared stages, run ${status.shared.runId}; no variant started)` : '';
    out.write(`\nsweep ${sweepId} failed${what}: ${failureMessage(err)}\n`);
    return 1;
  }
  await printChanges(client, final, seen, out);
  const views = await variantViews(variants, final);
  const shared = { reason: decision.reason, ...(input.shared ? { runId: input.shared.runId } : {}) };
  const report = { sweepId, configPath: input.configPath, shared, variants: views };
  const r = buildSweepReport(report);
  const md = renderSweepMarkdown(report, r);
  const folder = sweepFolder(sweepId);
  await writeFile(join(folder, 'sweep.md'), md);
  await writeFile(join(folder, 'sweep.html'), renderSweepHtml(report, r));
  await writeFile(join(folder, 'result.json'), JSON.stringify(final, null, 2));
  out.write(`\n${md}\n`);
  for (const v of views) {
    const mark = r.best.overall?.label === v.label ? '  ★ best overall' : '';
    out.write(`variant ${v.label}: run ${v.runId} ${v.state}${v.error ? ` (${v.error.split('\n')[0]})` : ''}${mark}\n`);
  }
  out.write(`\nreport: ${shownPath(join(folder, 'sweep.md'))}, ${shownPath(join(folder, 'sweep.html'))}\n`);
  return views.every((v) => v.state === 'completed') ? 0 : 1;
}

async function printChanges(
  client: Client,
  status: SweepStatus,
  seen: Map<string, string>,
  out: { write(s: string): unknown },
): Promise<void> {
  const children = [...(status.shared ? [status.shared] : []), ...status.variants];
  for (const c of children) {
    let line: string = c.state;
    if (c.state === 'running') {
      const run = await queryStatus(client.workflow.getHandle(c.runId) as WorkflowHandle, 2000).catch(() => undefined);
      const stage = run?.stages.find((s) => s.state === 'running' || s.state === 'waiting');
      // Between two stages nothing runs for a moment: wait for the next one rather than print a bare "running".
      if (!stage && seen.has(c.runId)) continue;
      if (stage) line = `running: ${stage.stage}${stage.state === 'waiting' ? ' (waiting for an operator)' : ''}`;
    }
    if (c.error) line += ` (${c.error.split('\n')[0]})`;
    if (seen.get(c.runId) === line) continue;
    seen.set(c.runId, line);
    out.write(`  ${new Date().toISOString().slice(11, 19)} ${c.label} [${c.runId}]: ${line}\n`);
  }
}

/** Each completed variant's run folder made as `aerie run` makes it (result.json, the report files), then read back. */
async function variantViews(variants: readonly Variant[], final: SweepResult): Promise<SweepVariantView[]> {
  const hosts = new HostPool();
  try {
    return await Promise.all(
      final.variants.map(async (v, i) => {
        const res: PipelineResult | null = final.results[i] ?? null;
        const entry: SweepVariantView = {
          label: v.label,
          runId: v.runId,
          state: v.state,
          ...(v.error ? { error: v.error } : {}),
        };
        if (!res?.report) return entry;
        const folder = localRunFolder(v.runId);
        await writeFile(join(folder, 'result.json'), JSON.stringify(res, null, 2));
        await writeFile(join(folder, 'report.md'), res.report.markdown);
        await copyReportFiles(folder, variants[i]!.config, res.report, hosts);
        return { ...entry, view: await loadRunView(v.runId, folder) };
      }),
    );
  } finally {
    await hosts.closeAll();
  }
}
