/**
 * The extract stage, SpecForge offline driver: `torchrun ... scripts/prepare_hidden_states.py`
 * launched detached and followed like training, writing SpecForge's own layout
 * (`rows_{k*G}-{(k+1)*G}/data_{i}.ckpt`, i = the sample's row in the data file) that its offline
 * trainers read. No model server: the script loads the target itself.
 *
 * Before every launch: the bytes still needed are estimated (tokens × 8 × H) and the launch is
 * refused when the destination cannot hold them. Before every relaunch and after the last exit:
 * every file is checked (extract-offline-verify.ts) and bad ones are deleted, so the script —
 * which skips files that exist — writes them again. Rows the script never wrote after a clean
 * exit were dropped by it (NaN states); they are counted, listed, and not silently lost.
 */
import type { Host } from '../hosts/host.js';
import { estimateTokens, parseSampleLine, renderForExtraction } from './conversations.js';
import { InsufficientSpaceError } from './extract.js';
import { estimatedBytesPerToken, formatBytes } from './extract-plan.js';
import { parseVerifyOutput, VERIFY_SCRIPT, type VerifyReport } from './extract-offline-verify.js';
import { streamLines } from './host-lines.js';
import { JobFailure, type JobHooks, type NextStep } from './job-supervise.js';
import { parseGenericProgress, type TrainProgress } from './train-progress.js';
import { classifyTrainFailure } from './train-failure.js';
import { TrainLaunchError } from './train.js';

export interface PrepareLaunch {
  launcher: string[];
  targetModelPath: string;
  draftModelConfig: string;
  dataPath: string;
  outputPath: string;
  chatTemplate: string;
  maxLength: number;
  tpSize: number;
  batchSize: number;
  fileGroupSize: number;
  compress: boolean;
  isPreformatted: boolean;
  memFractionStatic?: number;
  distTimeout?: number;
  extraArgs: string[];
}

const MANAGED = ['--target-model-path', '--draft-model-config', '--data-path', '--output-path', '--chat-template', '--max-length', '--tp-size', '--batch-size', '--file-group-size', '--compress', '--is-preformatted', '--sglang-mem-fraction-static', '--dist-timeout'];

export function renderPrepareArgv(l: PrepareLaunch): string[] {
  if (l.launcher.length === 0) throw new TrainLaunchError('stages.extract.launcher is empty');
  for (const a of l.extraArgs) {
    const name = a.split('=')[0]!;
    const hit = a.startsWith('--') && name.length > 2 ? MANAGED.find((f) => f === name || f.startsWith(name)) : undefined;
    if (hit) throw new TrainLaunchError(`stages.extract.extra-args: "${a}" sets ${hit}, which aerie sets from the extract stage config; set it there instead.`);
  }
  const argv = [
    ...l.launcher,
    '--target-model-path', l.targetModelPath,
    '--draft-model-config', l.draftModelConfig,
    '--data-path', l.dataPath,
    '--output-path', l.outputPath,
    '--chat-template', l.chatTemplate,
    '--max-length', String(l.maxLength),
    '--tp-size', String(l.tpSize),
    '--batch-size', String(l.batchSize),
    '--file-group-size', String(l.fileGroupSize),
  ];
  if (l.isPreformatted) argv.push('--is-preformatted');
  if (l.compress) argv.push('--compress');
  if (l.memFractionStatic !== undefined) argv.push('--sglang-mem-fraction-static', String(l.memFractionStatic));
  if (l.distTimeout !== undefined) argv.push('--dist-timeout', String(l.distTimeout));
  argv.push(...l.extraArgs);
  return argv;
}

/** Rows in the data file and the estimated tokens of each (capped at max-length), streamed. */
export async function estimateRows(host: Host, dataPath: string, maxLength: number): Promise<number[]> {
  const tokens: number[] = [];
  for await (const { text } of streamLines(host, dataPath)) {
    const parsed = parseSampleLine(text);
    tokens.push(parsed.ok ? Math.min(maxLength, Math.max(1, estimateTokens(renderForExtraction(parsed.sample)))) : 1);
  }
  return tokens;
}

export async function verifyOffline(host: Host, python: string, outDir: string, hiddenSize: number): Promise<VerifyReport> {
  if (!(await host.stat(outDir))) return { ok: new Map(), bad: [], files: 0, complete: true };
  const r = await host.exec([python, '-c', VERIFY_SCRIPT, outDir, String(hiddenSize)], { timeoutMs: 60 * 60_000 });
  const report = parseVerifyOutput(r.stdout);
  if (r.code !== 0 || !report.complete) {
    throw new JobFailure(
      r.code === 127 ? 'MissingDependencyError' : 'ExtractVerifyFailed',
      `checking the hidden-state files with ${python} on ${host.name} failed (exit ${r.code}): ${r.stderr.trim().slice(-500)}` +
        (r.code === 127 ? ' — set stages.extract.python to an interpreter on the host' : ''),
    );
  }
  return report;
}

export interface OfflineResult {
  samples: number;
  ok: number;
  dropped: number[];
  totalBytes: number;
  totalTokens: number;
}

export interface OfflineContext {
  host: Host;
  launch: PrepareLaunch;
  hiddenSize: number;
  python: string;
  /** Estimated tokens per row of the data file. */
  rowTokens: number[];
  /** Relaunches allowed to redo files found bad after a clean exit. */
  redoLimit: number;
  onVerified?(report: VerifyReport, removed: number): void;
}

export function offlineHooks(c: OfflineContext): JobHooks<OfflineResult, TrainProgress> {
  const { host, launch } = c;
  const argv = renderPrepareArgv(launch);
  let redos = 0;

  /** Check every file, delete the bad ones, and return what is good. */
  const sweep = async (): Promise<VerifyReport> => {
    const report = await verifyOffline(host, c.python, launch.outputPath, c.hiddenSize);
    for (const b of report.bad) await host.remove(b.path);
    c.onVerified?.(report, report.bad.length);
    return report;
  };
  const checkSpace = async (report: VerifyReport): Promise<void> => {
    let tokens = 0;
    c.rowTokens.forEach((t, i) => (tokens += report.ok.has(i) ? 0 : t));
    const needed = tokens * estimatedBytesPerToken(c.hiddenSize);
    await host.mkdirp(launch.outputPath);
    const free = await host.freeBytes(launch.outputPath);
    if (needed > free) {
      throw new InsufficientSpaceError(
        needed,
        free,
        `extract needs about ${formatBytes(needed)} (${needed} bytes: ${c.rowTokens.length - report.ok.size} samples, ~${tokens} tokens × 8 × ` +
          `hidden ${c.hiddenSize}) in ${launch.outputPath} on ${host.name}, but only ${formatBytes(free)} (${free} bytes) are free; ` +
          `free space or point the extraction at a larger disk`,
      );
    }
  };
  const relaunch = async (): Promise<NextStep<OfflineResult>> => {
    const report = await sweep();
    await checkSpace(report);
    return { kind: 'launch', argv };
  };
  return {
    fresh: relaunch,
    async afterSuccess(ended) {
      const report = await sweep();
      if (report.bad.length > 0) {
        if (redos++ >= c.redoLimit) {
          throw new JobFailure('ExtractFilesBad', `prepare_hidden_states.py exited 0 but left ${report.bad.length} bad files again (e.g. ${report.bad[0]!.path}: ${report.bad[0]!.reason})`, ended.logTail);
        }
        await checkSpace(report);
        return { kind: 'launch', argv, note: `redoing ${report.bad.length} bad files` };
      }
      const samples = c.rowTokens.length;
      const dropped: number[] = [];
      let totalBytes = 0;
      let totalTokens = 0;
      for (let i = 0; i < samples; i++) {
        const f = report.ok.get(i);
        if (!f) dropped.push(i);
        else {
          totalBytes += f.bytes;
          totalTokens += Math.max(0, f.tokens);
        }
      }
      if (dropped.length === samples) {
        throw new JobFailure('ExtractFilesMissing', `prepare_hidden_states.py exited 0 but wrote no data_{i}.ckpt under ${launch.outputPath}; see ${ended.record.logPath}`, ended.logTail);
      }
      return { kind: 'done', result: { samples, ok: samples - dropped.length, dropped, totalBytes, totalTokens } };
    },
    afterCrash: relaunch,
    classify: classifyTrainFailure,
    failureType: (f) => (f.kind === 'oom' ? 'OutOfMemoryError' : f.kind === 'missing-module' ? 'MissingDependencyError' : 'ExtractFailed'),
    parse: (chunk, prev) => parseGenericProgress(chunk, prev),
  };
}
