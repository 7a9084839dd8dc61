/**
 * The extract stage, transformers driver: aerie's own capture on a transformers model
 * (`python -m aerie_hs.hf_extract`, py/aerie_hs/hf_extract.py) run on the target host as a
 * detached job, followed like SpecForge's prepare script (offline-driver.ts). No model server:
 * for targets served by an engine whose own extraction cannot run there (vLLM 0.32's is
 * GPU-only) and small enough for a transformers forward on the host, CPU or GPU.
 *
 * The job tokenizes each sample with aerie_hs.tokens (SpecForge's rules, as the server drivers
 * do), captures the residual stream the serving engine will feed the drafter (SGLang: the input
 * of layer id+1 for each draft aux layer id; vLLM: the input of layer id, `--served-by vllm`)
 * and the final post-norm state with capture.capture_from_hf, and
 * writes `rows_<g>-<g+G>/data_<i>.ckpt` with aerie's torch.save writer, each under a temp name
 * then renamed. It skips samples whose file is complete, so a relaunch after a crash continues.
 * After a clean exit every file is checked (offline-verify.ts); bad ones are deleted and the job
 * relaunched to write them again, within crash-retries. The self-check then runs over the
 * samples the job kept aside (selfcheck.ts), as for the server drivers.
 */
import type { Host } from '../../hosts/host.js';
import type { FatalType } from '../../failures.js';
import { classifyTrainFailure, JobFailure, type JobHooks, type NextStep, type TrainFailure } from '../common/index.js';
import { verifyOffline, type VerifyReport } from './offline-verify.js';

export interface HfExtractLaunch {
  /** stages.extract.python: torch and transformers there. */
  python: string;
  modelPath: string;
  /** The generate stage's conversations. */
  dataPath: string;
  outDir: string;
  draftModelConfig: string;
  chatTemplate: string;
  maxLength: number;
  fileGroupSize: number;
  dtype: string;
  device: string;
  batchSize: number;
  crossCheck: 'auto' | 'require' | 'off';
  selfCheckSamples: number;
  selfCheckFinal: number;
  trustRemoteCode: boolean;
  /**
   * The engine that will serve the drafter (server.engine): which states it feeds for the draft's
   * layer ids. SGLang the output of layer id, vLLM the input of layer id (engines/aux-layers.ts).
   */
  servedBy?: 'sglang' | 'vllm';
}

/** The job's argv; it runs with aerie's staged package folder as its working directory (`python -m`). */
export function renderHfExtractArgv(l: HfExtractLaunch): string[] {
  const argv = [
    l.python,
    '-m',
    'aerie_hs.hf_extract',
    '--model',
    l.modelPath,
    '--data',
    l.dataPath,
    '--out',
    l.outDir,
    '--draft-model-config',
    l.draftModelConfig,
    '--chat-template',
    l.chatTemplate,
    '--max-length',
    String(l.maxLength),
    '--file-group-size',
    String(l.fileGroupSize),
    '--dtype',
    l.dtype,
    '--device',
    l.device,
    '--batch-size',
    String(l.batchSize),
    '--cross-check',
    l.crossCheck,
    '--selfcheck-samples',
    String(l.selfCheckSamples),
    '--selfcheck-final',
    String(l.selfCheckFinal),
  ];
  if (l.trustRemoteCode) argv.push('--trust-remote-code');
  if (l.servedBy === 'vllm') argv.push('--served-by', 'vllm');
  return argv;
}

/** What the job's progress lines say (`{"aerie_hf_extract": {...}}` on stdout). */
export interface HfProgress {
  phase?: string;
  done?: number;
  total?: number;
  ok?: number;
  written?: number;
  skipped?: number;
  errors?: number;
  tokens?: number;
  bytes?: number;
  rate?: number;
  device?: string;
  /** Newline-terminated lines read so far. */
  lines: number;
  /** An unfinished last line, carried to the next chunk (kept short). */
  partial?: string;
}

const MAX_PARTIAL = 8192;
const PROGRESS_KEYS = [
  'phase',
  'done',
  'total',
  'ok',
  'written',
  'skipped',
  'errors',
  'tokens',
  'bytes',
  'rate',
  'device',
];

export function parseHfProgress(chunk: string, prev?: HfProgress): HfProgress {
  const p: HfProgress = { ...(prev ?? { lines: 0 }) };
  const all = (prev?.partial ?? '') + chunk;
  const cut = all.lastIndexOf('\n') + 1;
  const lines = all.slice(0, cut).split('\n');
  p.lines = (prev?.lines ?? 0) + lines.length - 1;
  for (const line of lines) {
    if (!line.startsWith('{"aerie_hf_extract"')) continue;
    try {
      const row = (JSON.parse(line) as { aerie_hf_extract?: Record<string, unknown> }).aerie_hf_extract;
      for (const k of PROGRESS_KEYS) {
        const v = row?.[k];
        if (typeof v === 'number' || typeof v === 'string') (p as unknown as Record<string, unknown>)[k] = v;
      }
    } catch {
      // a line that only looks like ours
    }
  }
  const tail = all.slice(cut);
  if (tail) p.partial = tail.length > MAX_PARTIAL ? tail.slice(-MAX_PARTIAL) : tail;
  else delete p.partial;
  return p;
}

const SETUP = /aerie_hf_extract: error: (.*)$/m;
const DISAGREE = /aerie_hf_extract: tokens disagree: (.*)$/m;
const lastLine = (text: string, re: RegExp): string | undefined => {
  let found: string | undefined;
  for (const line of text.split(/\r?\n/)) {
    const m = re.exec(line);
    if (m) found = m[1];
  }
  return found;
};

/**
 * Why the job died: its own refusals first (a set-up error names the field and the fix; SpecForge's
 * preprocessing disagreeing), then what a trainer's log would show (OOM, a missing module, a full
 * disk), with the advice pointed at the extract stage. Anything else is a crash worth a relaunch:
 * the job continues from the files it wrote.
 */
export function classifyHfFailure(logTail: string): TrainFailure {
  const setup = lastLine(logTail, SETUP);
  if (setup) return { kind: 'setup', retryable: false, evidence: setup, advice: setup };
  const disagree = lastLine(logTail, DISAGREE);
  if (disagree)
    return {
      kind: 'usage',
      retryable: false,
      evidence: disagree,
      advice: `SpecForge's own preprocessing on the host disagrees with aerie's tokens: ${disagree}`,
    };
  const f = classifyTrainFailure(logTail);
  switch (f.kind) {
    case 'oom':
      return {
        ...f,
        advice:
          'The transformers forward ran out of memory; a relaunch fails again on the same sample. Lower stages.extract.max-length, ' +
          'run it on a larger GPU (stages.extract.device), or use a server driver for this target.',
      };
    case 'missing-module':
      return {
        ...f,
        advice: `stages.extract.python cannot run aerie_hs.hf_extract (${f.evidence ?? 'a module is missing'}). Fix: point it at an interpreter with torch and transformers.`,
      };
    case 'disk-full':
      return {
        ...f,
        advice: "The disk filled up under the run's hidden_states folder. Free space there, then aerie retry.",
      };
    case 'crash':
    case 'teardown':
      return {
        kind: 'crash',
        retryable: true,
        ...(f.evidence ? { evidence: f.evidence } : {}),
        advice: `aerie_hs.hf_extract crashed${f.evidence ? ` (${f.evidence})` : ''}; aerie relaunches it, and it skips the samples whose files are complete.`,
      };
    default:
      return { ...f, advice: `aerie_hs.hf_extract failed (${f.evidence ?? f.kind}). ${f.advice}` };
  }
}

export function hfFailureType(f: TrainFailure): FatalType {
  if (f.kind === 'setup') return 'ConfigError';
  if (f.kind === 'usage' && /preprocessing on the host disagrees/.test(f.advice)) return 'TokensDisagree';
  if (f.kind === 'oom') return 'OutOfMemoryError';
  if (f.kind === 'missing-module') return 'MissingDependencyError';
  return 'ExtractFailed';
}

/** hf_extract.json: the job's own account of its last launch. */
export interface HfSummary {
  lines: number;
  ok: number;
  written: number;
  skipped: number;
  errors: number;
  tokens: number;
  bytes: number;
  hidden_size: number;
  num_layers: number;
  draft_layer_ids: number[];
  capture_ids: number[];
  layers_from: string;
  device: string;
  dtype: string;
  tokens_method: string;
}

export interface HfResult {
  /** Lines of the data file. */
  samples: number;
  /** Files that passed aerie's check: what the trainer will read. */
  ok: number;
  /** Lines that became no file (extract_error.jsonl says why). */
  errors: number;
  totalBytes: number;
  totalTokens: number;
  summary: HfSummary;
}

export const hfSummaryPath = (outDir: string): string => `${outDir.replace(/\/+$/, '')}/hf_extract.json`;

export interface HfContext {
  host: Host;
  launch: HfExtractLaunch;
  hiddenSize: number;
  /** Relaunches allowed to redo files found bad after a clean exit. */
  redoLimit: number;
  onVerified?(report: VerifyReport, removed: number): void;
}

export function hfExtractHooks(c: HfContext): JobHooks<HfResult, HfProgress> {
  const { host, launch } = c;
  const argv = renderHfExtractArgv(launch);
  let redos = 0;
  const sweep = async (): Promise<VerifyReport> => {
    const report = await verifyOffline(host, launch.python, launch.outDir, c.hiddenSize);
    for (const b of report.bad) await host.remove(b.path);
    c.onVerified?.(report, report.bad.length);
    return report;
  };
  const relaunch = (note?: string): Promise<NextStep<HfResult>> =>
    Promise.resolve({ kind: 'launch', argv, ...(note ? { note } : {}) });
  return {
    fresh: () => relaunch(),
    async afterSuccess(ended) {
      let summary: HfSummary;
      try {
        summary = JSON.parse((await host.readFile(hfSummaryPath(launch.outDir))).toString('utf8')) as HfSummary;
      } catch (err) {
        throw new JobFailure(
          'ExtractFilesMissing',
          `aerie_hs.hf_extract exited 0 but left no readable ${hfSummaryPath(launch.outDir)} (${(err as Error).message}); see ${ended.record.logPath}`,
          ended.logTail,
        );
      }
      const report = await sweep();
      // Files found bad (deleted by the sweep) or gone since the job wrote them (a rerun of the
      // stage after one was removed): a relaunch writes exactly those again and skips the rest.
      const missing = Math.max(0, summary.ok - report.ok.size);
      if (report.bad.length > 0 || missing > 0) {
        const what = [
          report.bad.length
            ? `${report.bad.length} bad files (e.g. ${report.bad[0]!.path}: ${report.bad[0]!.reason})`
            : '',
          missing ? `${missing} of its ${summary.ok} files missing` : '',
        ]
          .filter(Boolean)
          .join(' and ');
        if (redos++ >= c.redoLimit)
          throw new JobFailure('ExtractFilesBad', `aerie_hs.hf_extract exited 0 but left ${what} again`, ended.logTail);
        return relaunch(`rewriting ${what}`);
      }
      if (report.ok.size !== summary.ok) {
        throw new JobFailure(
          'ExtractFilesMissing',
          `aerie_hs.hf_extract reports ${summary.ok} samples written, but ${launch.outDir} holds ${report.ok.size} good data_<i>.ckpt files; see ${ended.record.logPath}`,
          ended.logTail,
        );
      }
      if (summary.ok === 0) {
        throw new JobFailure(
          'ExtractFilesMissing',
          `aerie_hs.hf_extract wrote no feature file for the ${summary.lines} lines of ${launch.dataPath}: every one failed (${launch.outDir}/extract_error.jsonl says why)`,
          ended.logTail,
        );
      }
      let totalBytes = 0;
      let totalTokens = 0;
      for (const f of report.ok.values()) {
        totalBytes += f.bytes;
        totalTokens += Math.max(0, f.tokens);
      }
      return {
        kind: 'done',
        result: {
          samples: summary.lines,
          ok: report.ok.size,
          errors: summary.errors,
          totalBytes,
          totalTokens,
          summary,
        },
      };
    },
    // The job skips what it finished: a relaunch continues.
    afterCrash: () => relaunch(),
    classify: classifyHfFailure,
    failureType: hfFailureType,
    parse: parseHfProgress,
  };
}
