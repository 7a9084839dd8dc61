/**
 * The extract stage, SpecForge offline driver: `torchrun ... scripts/prepare_hidden_states.py`
 * launched detached and followed like training, writing SpecForge's own layout
 * (`rows_{k*G}-{(k+1)*G}/data_{i}.ckpt`) that its offline trainers read. No model server: the
 * script loads the target itself.
 *
 * `data_{i}` is NOT row i of the data file, and no file says which row it holds: the script
 * shuffles the rows before numbering them (`dataset.shuffle(seed=42)`,
 * SpecForge@a6b6b023:specforge/data/preprocessing.py:177,232; the same at
 * SpecForge@73e6f808:specforge/data/preprocessing.py:287,336), drops their `id`
 * (SpecForge@a6b6b023:specforge/data/preprocessing.py:259-260), and names each rank's files
 * from a contiguous start while its DistributedSampler deals rows round-robin, padding to a
 * multiple of the ranks, behind a DataLoader with drop_last=True
 * (SpecForge@a6b6b023:specforge/data/utils.py:226-241; scripts/prepare_hidden_states.py:874-913).
 * So aerie counts files written against rows given and never names a row as dropped.
 *
 * Before every launch: the bytes still needed are estimated (tokens × 8 × H) and the launch is
 * refused when the destination cannot hold them. Before every relaunch and after the last exit:
 * every file is checked (offline-verify.ts) and bad ones are deleted, so the script —
 * which skips files that exist — writes them again.
 */
import type { Host } from '../../hosts/host.js';
import {
  classifyTrainFailure,
  formatBytes,
  InsufficientSpaceError,
  JobFailure,
  type JobHooks,
  type NextStep,
  SPECFORGE_PROFILES,
  type SpecforgeProfile,
} from '../common/index.js';
import { offlineBytesNeeded } from './offline-estimate.js';
import { verifyOffline, type VerifyReport } from './offline-verify.js';
import { parseGenericProgress, type TrainProgress, TrainLaunchError } from '../train/index.js';

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
  /** The SpecForge revision on the host; the `cli` profile (SpecForge@a6b6b023) when absent. */
  profile?: SpecforgeProfile;
}

const MANAGED = [
  '--target-model-path',
  '--draft-model-config',
  '--enable-aux-hidden-states',
  '--data-path',
  '--output-path',
  '--chat-template',
  '--max-length',
  '--tp-size',
  '--batch-size',
  '--file-group-size',
  '--compress',
  '--is-preformatted',
  '--sglang-mem-fraction-static',
  '--dist-timeout',
];

/**
 * The script's argv for the host's revision. Flags every profile's scripts take, with their
 * lines at the oldest and newest revision: --target-model-path (SpecForge@73e6f808:scripts/prepare_hidden_states.py:76,
 * @a6b6b023:…:103), --data-path (84, 125), --max-length (85, 126), --chat-template (86, 127),
 * --is-preformatted (88, 129), --tp-size (96, 137), --batch-size (97, 138), --output-path
 * (101, 142), --dist-timeout (109, 144; minutes), --file-group-size (130, 165; since 35504d45),
 * --sglang-mem-fraction-static (SpecForge@73e6f808:specforge/args.py:104, @a6b6b023:…:188).
 */
export function renderPrepareArgv(l: PrepareLaunch): string[] {
  const profile = l.profile ?? SPECFORGE_PROFILES.cli;
  if (l.launcher.length === 0) throw new TrainLaunchError('stages.extract.launcher is empty');
  for (const a of l.extraArgs) {
    const name = a.split('=')[0]!;
    const hit =
      a.startsWith('--') && name.length > 2 ? MANAGED.find((f) => f === name || f.startsWith(name)) : undefined;
    if (hit)
      throw new TrainLaunchError(
        `stages.extract.extra-args: "${a}" sets ${hit}, which aerie sets from the extract stage config and the SpecForge revision; set it there instead.`,
      );
  }
  const argv = [...l.launcher, '--target-model-path', l.targetModelPath];
  if (profile.prepareAuxFlag === '--draft-model-config') {
    // Required from SpecForge@ca949555:scripts/prepare_hidden_states.py:93-101 (argparse
    // required=True); at SpecForge@a6b6b023:…:110-118 it defaults to None, but main() reads the
    // draft vocab size from it unconditionally (…:778 → _resolve_draft_vocab_size, :199-203), so
    // it is still needed. It also sizes the vocab mapping the script writes (D9).
    if (!l.draftModelConfig) {
      throw new TrainLaunchError(
        `stages.extract.draft-model-config: SpecForge's prepare_hidden_states.py (${profile.label}) needs --draft-model-config; set stages.extract.draft-model-config or stages.train.draft-model-config to the draft config.json on the host.`,
      );
    }
    argv.push('--draft-model-config', l.draftModelConfig);
  } else {
    // SpecForge@73e6f808:scripts/prepare_hidden_states.py:80 (and @20e2e3f0:…:92): a store_true
    // that main() hands to the generator, which never reads it (…:218, 638): aux states are
    // captured regardless (set_aux_hidden_states_layers(None) picks the default layers, :181).
    // Passed as SpecForge's own examples do; --draft-model-config does not exist here (argparse
    // exits 2 on it) — it arrives with ca949555.
    argv.push('--enable-aux-hidden-states');
  }
  argv.push(
    '--data-path',
    l.dataPath,
    '--output-path',
    l.outputPath,
    '--chat-template',
    l.chatTemplate,
    '--max-length',
    String(l.maxLength),
    '--tp-size',
    String(l.tpSize),
    '--batch-size',
    String(l.batchSize),
    '--file-group-size',
    String(l.fileGroupSize),
  );
  if (l.isPreformatted) argv.push('--is-preformatted');
  if (l.compress) {
    // --compress arrives with SpecForge@7c7ef547:scripts/prepare_hidden_states.py:147
    // (2026-01-26): absent at 73e6f808 and inside the v0.2-final-save range (03a3dedb…961ca7c3^),
    // so aerie cannot know that host has it.
    if (profile.id === 'v0.2.0' || profile.id === 'v0.2-final-save') {
      throw new TrainLaunchError(
        `stages.extract.compress: SpecForge's prepare_hidden_states.py has --compress only from 7c7ef547 (2026-01-26); the host runs ${profile.label}, whose script may not have it (argparse would exit 2). Set stages.extract.compress: false, or update SpecForge on the host to 961ca7c3 or later.`,
      );
    }
    argv.push('--compress');
  }
  if (l.memFractionStatic !== undefined) argv.push('--sglang-mem-fraction-static', String(l.memFractionStatic));
  if (l.distTimeout !== undefined) argv.push('--dist-timeout', String(l.distTimeout));
  argv.push(...l.extraArgs);
  return argv;
}

export interface OfflineResult {
  /** Rows in the data file aerie handed the script. */
  samples: number;
  /** Files that passed the check: what the trainer will read. */
  ok: number;
  /** Rows given minus good files (never negative). Which rows they were cannot be known. */
  unwritten: number;
  /** Good files whose index is not below the row count: duplicates of SpecForge's sampler padding. */
  beyondRows: number;
  /** What the counts mean, for the stage's note and manifest. */
  accounting: string;
  /** `<out>/vocab_mapping/vocab_mapping.pt`, where the script wrote one (SpecForge from ca949555). */
  vocabMapping?: string;
  totalBytes: number;
  totalTokens: number;
}

/**
 * Where prepare_hidden_states.py leaves the draft vocab mapping: rank 0 writes it under a temp
 * name in the same folder and renames it into place (SpecForge@a6b6b023:scripts/prepare_hidden_states.py:238-239,
 * 244-273; from SpecForge@ca949555:…:228-229). Earlier revisions write none.
 */
export const vocabMappingPath = (outputPath: string): string =>
  `${outputPath.replace(/\/+$/, '')}/vocab_mapping/vocab_mapping.pt`;

/** The plain statement of what a count of files means, with its source. */
export function offlineAccounting(samples: number, ok: number, batchSize: number): string {
  const short = samples - ok;
  return (
    `prepare_hidden_states.py left ${ok} good feature files for ${samples} input rows` +
    (short > 0 ? ` (${short} fewer)` : '') +
    `. SpecForge shuffles the rows (seed 42) and drops their ids before numbering files, so data_{i} is not row i and ` +
    `no file can be mapped back to a sample id (SpecForge@a6b6b023:specforge/data/preprocessing.py:232,259-260)` +
    (short > 0
      ? `; rows go missing to NaN states, to the DataLoader's drop_last (up to ${batchSize - 1} rows per data-parallel rank at --batch-size ${batchSize}, ` +
        `SpecForge@a6b6b023:specforge/data/utils.py:240) and to the sampler's padding, which repeats rows in place of others`
      : '')
  );
}

export interface OfflineContext {
  host: Host;
  launch: PrepareLaunch;
  hiddenSize: number;
  python: string;
  /** Estimated tokens per row of the data file (offline-estimate.ts). */
  rowTokens: number[];
  /** How rowTokens were estimated, for the disk-space refusal. */
  estimateNote?: string;
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
    const left = Math.max(0, c.rowTokens.length - report.ok.size);
    const { tokens, bytes: needed } = offlineBytesNeeded(c.rowTokens, left, launch.batchSize, c.hiddenSize);
    await host.mkdirp(launch.outputPath);
    const free = await host.freeBytes(launch.outputPath);
    if (needed > free) {
      throw new InsufficientSpaceError(
        needed,
        free,
        `extract needs about ${formatBytes(needed)} (${needed} bytes: ${left} samples, ~${tokens} tokens padded to batches of ${launch.batchSize}, ` +
          `× (8 × hidden ${c.hiddenSize} + 16); ${c.estimateNote ?? 'whitespace words as tokens'}) in ${launch.outputPath} on ${host.name}, ` +
          `but only ${formatBytes(free)} (${free} bytes) are free; free space or point the extraction at a larger disk`,
      );
    }
  };
  const relaunch = async (): Promise<NextStep<OfflineResult>> => {
    const report = await sweep();
    await checkSpace(report);
    return { kind: 'launch', argv };
  };
  const hooks: JobHooks<OfflineResult, TrainProgress> = {
    fresh: relaunch,
    async afterSuccess(ended) {
      const report = await sweep();
      if (report.bad.length > 0) {
        if (redos++ >= c.redoLimit) {
          throw new JobFailure(
            'ExtractFilesBad',
            `prepare_hidden_states.py exited 0 but left ${report.bad.length} bad files again (e.g. ${report.bad[0]!.path}: ${report.bad[0]!.reason})`,
            ended.logTail,
          );
        }
        await checkSpace(report);
        return { kind: 'launch', argv, note: `redoing ${report.bad.length} bad files` };
      }
      const samples = c.rowTokens.length;
      let totalBytes = 0;
      let totalTokens = 0;
      let beyondRows = 0;
      for (const [idx, f] of report.ok) {
        totalBytes += f.bytes;
        totalTokens += Math.max(0, f.tokens);
        if (idx >= samples) beyondRows++;
      }
      const ok = report.ok.size;
      if (ok === 0) {
        throw new JobFailure(
          'ExtractFilesMissing',
          `prepare_hidden_states.py exited 0 but wrote no data_{i}.ckpt under ${launch.outputPath} for ${samples} rows; ` +
            `its DataLoader drops each rank's last partial batch (drop_last=True, SpecForge@a6b6b023:specforge/data/utils.py:240), ` +
            `so fewer rows per data-parallel rank than --batch-size ${launch.batchSize} give no files at all; see ${ended.record.logPath}`,
          ended.logTail,
        );
      }
      const mapping = vocabMappingPath(launch.outputPath);
      const vocabMapping = (await host.stat(mapping)) ? mapping : undefined;
      return {
        kind: 'done',
        result: {
          samples,
          ok,
          unwritten: Math.max(0, samples - ok),
          beyondRows,
          accounting: offlineAccounting(samples, ok, launch.batchSize),
          ...(vocabMapping ? { vocabMapping } : {}),
          totalBytes,
          totalTokens,
        },
      };
    },
    // prepare_hidden_states.py tears torch.distributed down in a finally block
    // (SpecForge@73e6f808:scripts/prepare_hidden_states.py:654-656), which raises on torch 2.11
    // before 7a81ce53: the files were all written, so judge them as after a clean exit.
    afterCrash: (ended, failure) => (failure.kind === 'teardown' ? hooks.afterSuccess(ended) : relaunch()),
    classify: classifyTrainFailure,
    failureType: (f) =>
      f.kind === 'oom' ? 'OutOfMemoryError' : f.kind === 'missing-module' ? 'MissingDependencyError' : 'ExtractFailed',
    parse: (chunk, prev) => parseGenericProgress(chunk, prev),
  };
  return hooks;
}
