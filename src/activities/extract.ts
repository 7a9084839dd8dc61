/**
 * The extract stage's activities: the target's hidden states for the generated conversations,
 * with the patched server (aerie's capture) or stock SGLang's two passes (extractHiddenStates),
 * or with SpecForge's prepare_hidden_states.py (extractOffline); aerie's capture on a
 * transformers forward on the host (extractTransformers) is in extract-hf.ts. All write SpecForge's layout,
 * which its trainers read, and resume by sample id. The space check before any launch is in
 * extract-space.ts; the helpers it shares with these are exported here.
 */
import { withRunGpus } from '../config/gpus.js';
import { Context } from '@temporalio/activity';
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import {
  EarlySamplesFailedError,
  extractBatchDir,
  extractBatchSamples,
  runExtract,
  extractDumpDir,
  runStockAux,
  SelfCheckFailedError,
  TokensDisagreeError,
  offlineHooks,
  type OfflineResult,
  estimateOfflineTokens,
  type TokenizerOnHost,
} from '../stages/extract/index.js';
import {
  InsufficientSpaceError,
  AeriePyError,
  shipAeriePy,
  SPECFORGE_PROFILES,
  type SpecforgeProfileId,
  JobFailure,
  superviseJob,
} from '../stages/common/index.js';
import { prepareSpec, type HiddenStates } from '../stages/launch-specs.js';
import type { TrainProgress } from '../stages/train/index.js';
import { TrainLaunchError } from '../stages/train/index.js';
import {
  cancelRequested,
  expandEnv,
  fatal,
  keepHeartbeating,
  runPaths,
  type ActivityDeps,
  type RunRef,
  type StageOutcome,
} from './context.js';
import type { ServerLaunch } from './server-types.js';
import { whileServerLives } from './server-watch.js';

export interface ExtractOutcome extends StageOutcome {
  hidden: HiddenStates;
  count: number;
  bytes: number;
  argv?: string[];
}

/** Errors a retry cannot fix become non-retryable failures with the stage's own words. */
export function extractFailure(err: unknown): unknown {
  if (err instanceof InsufficientSpaceError)
    return fatal('InsufficientSpace', err.message, { neededBytes: err.neededBytes, freeBytes: err.freeBytes });
  if (err instanceof TrainLaunchError) return fatal('ConfigError', err.message);
  if (err instanceof SelfCheckFailedError)
    return fatal('ExtractSelfCheckFailed', err.message, { verdict: err.verdict.messages.slice(0, 20) });
  if (err instanceof EarlySamplesFailedError) return fatal('ExtractFirstSamplesFailed', err.message);
  if (err instanceof TokensDisagreeError) return fatal('TokensDisagree', err.message);
  if (err instanceof AeriePyError) return fatal('AeriePyFailed', err.message);
  if (err instanceof JobFailure)
    return fatal(err.type, err.message, err.logTail ? { logTail: err.logTail } : undefined);
  return err;
}

export async function modelHiddenSize(host: Host, modelPath: string): Promise<number> {
  try {
    const cfg = JSON.parse((await host.readFile(`${modelPath}/config.json`)).toString('utf8')) as {
      hidden_size?: number;
    };
    if (typeof cfg.hidden_size === 'number') return cfg.hidden_size;
  } catch {
    // fall through to the error below
  }
  throw fatal(
    'ConfigError',
    `cannot read hidden_size from ${modelPath}/config.json on ${host.name}; set stages.extract.hidden-size`,
  );
}

/** The target's tokenizer through the extract stage's interpreter: SpecForge's environment on the host. */
export function offlineTokenizer(config: Config): TokenizerOnHost | undefined {
  const e = config.stages.extract;
  if (e.driver !== 'specforge-offline') return undefined;
  const trust = [...e['extra-args'], ...config.server['extra-args']].includes('--trust-remote-code');
  return {
    python: e.python,
    modelPath: config.target['model-path'],
    chatTemplate: e['chat-template'],
    trustRemoteCode: trust,
  };
}

export function extractActivities({ hosts }: ActivityDeps) {
  return {
    /**
     * Extraction through a server: aerie's capture plugin (patched-server), or stock SGLang's
     * two passes (stock-server: `pass` aux, then final, each on its own launch).
     */
    async extractHiddenStates(
      input: RunRef & { launch: ServerLaunch; dataPath: string; pass?: 'aux' | 'final'; batch?: number },
    ): Promise<ExtractOutcome> {
      const { config, runId, launch, batch } = input;
      // A pool's batch: its config aims at its server's host, which sees the run folder at the same path.
      const host = hosts.get(config);
      const e = config.stages.extract;
      if (e.driver === 'specforge-offline' || e.driver === 'transformers')
        throw fatal('ConfigError', `extractHiddenStates runs a server driver, not ${e.driver}`);
      const hiddenDir = runPaths(host, runId).hidden;
      const outDir = batch === undefined ? hiddenDir : extractBatchDir(hiddenDir, batch);
      const samplesPath = batch === undefined ? input.dataPath : extractBatchSamples(hiddenDir, batch);
      let progress: unknown = { phase: 'starting' };
      const stopBeat = keepHeartbeating(() => progress);
      try {
        const hiddenSize = e['hidden-size'] ?? (await modelHiddenSize(host, config.target['model-path']));
        const py = await shipAeriePy(host, e.python);
        // Stock SGLang: aerie's client on the host talks to the server where the host reaches it.
        const stock =
          e.driver === 'stock-server'
            ? {
                address: config.server['listen-host'] === '0.0.0.0' ? '127.0.0.1' : config.server['listen-host'],
                port: launch.port,
                concurrency: e.concurrency,
                captureIds: (launch.captureLayers ?? []).map((x) => x + 1),
              }
            : undefined;
        const dumpDir = extractDumpDir(config, runId, outDir);
        const common = {
          host,
          baseUrl: await host.httpBase(launch.port),
          py,
          samplesPath,
          dumpDir,
          outDir,
          modelPath: config.target['model-path'],
          hiddenSize,
          chatTemplate: e['chat-template'],
          maxLength: e['max-length'],
          fileGroupSize: e['file-group-size'],
          crossCheck: e['cross-check'],
          trustRemoteCode: config.server['extra-args'].includes('--trust-remote-code'),
          concurrency: e.concurrency,
          selfCheck: {
            samples: e['self-check'].samples,
            finalSamples: e['self-check']['final-samples'],
            minAgreement: e['self-check']['min-agreement'],
          },
        };
        if (stock && input.pass === 'aux') {
          const aux = await whileServerLives(host, launch, (signal) =>
            runStockAux({ ...common, stock, signal, onProgress: (p) => (progress = { ...p, pass: 'aux' }) }),
          );
          return {
            hidden: { dir: outDir, layout: 'specforge' },
            count: aux.ready,
            bytes: 0,
            outputs: [dumpDir],
            note: `stock aux pass: ${aux.ready} of ${aux.samples} samples ready for the final pass${aux.errors ? `, ${aux.errors} errors (stock-aux-errors.jsonl)` : ''}`,
          };
        }
        const summary = await whileServerLives(host, launch, async (signal) =>
          runExtract({
            ...common,
            ...(stock ? { stock } : {}),
            signal,
            onProgress: (p) => (progress = p),
          }),
        );
        const c = summary.counts;
        return {
          hidden: { dir: outDir, layout: 'specforge' },
          count: c.ok,
          bytes: summary.totalBytes,
          outputs: [outDir],
          note:
            `${c.ok} of ${c.input} samples, ${(summary.totalBytes / 2 ** 20).toFixed(1)} MiB in SpecForge's layout (${stock ? 'stock SGLang, two passes' : "aerie's capture"})` +
            `${c.error ? `, ${c.error} errors (extract_error.jsonl)` : ''}${c.resumed ? `, ${c.resumed} from before a resume` : ''}; self-check: ${summary.manifest.selfCheck.final}`,
        };
      } catch (err) {
        throw extractFailure(err);
      } finally {
        stopBeat();
      }
    },

    /** SpecForge's prepare_hidden_states.py, launched detached and followed like training. */
    async extractOffline(
      input: RunRef & { dataPath: string; specforge?: SpecforgeProfileId },
    ): Promise<ExtractOutcome> {
      const { config, runId } = input;
      const host = hosts.get(config);
      const e = config.stages.extract;
      if (e.driver !== 'specforge-offline')
        throw fatal('ConfigError', `extractOffline runs the specforge-offline driver, not ${e.driver}`);
      const ctx = Context.current();
      const paths = runPaths(host, runId);
      const outDir = paths.hidden;
      // Checking 100k files or estimating a large set takes longer than a heartbeat timeout:
      // beat from a timer with the latest details, not only from the job's log polls.
      let details: Record<string, unknown> = { phase: 'estimating' };
      const stopBeat = keepHeartbeating(() => details);
      try {
        const hiddenSize = e['hidden-size'] ?? (await modelHiddenSize(host, config.target['model-path']));
        const launch = prepareSpec(config, input.dataPath, outDir, SPECFORGE_PROFILES[input.specforge ?? 'cli']);
        const estimate = await estimateOfflineTokens(host, input.dataPath, e['max-length'], offlineTokenizer(config));
        const rowTokens = estimate.tokens;
        details = { phase: 'checking files' };
        let verified = '';
        const { result, launches, argv } = await superviseJob<OfflineResult, TrainProgress>(
          {
            host,
            prefix: `${runId}.extract.`,
            logPath: (gen) => `${paths.logs}/extract-${gen}.log`,
            cwd: paths.root,
            env: expandEnv(withRunGpus(config, e.env)),
            crashRetries: e['crash-retries'],
            pollMs: 2000,
            signal: ctx.cancellationSignal,
            stopJob: cancelRequested,
            heartbeat: (d) => {
              const p = d.progress;
              details = {
                phase: 'extracting',
                launchId: d.launchId,
                pid: d.pid,
                argv: d.argv,
                done: p?.step,
                total: p?.totalSteps ?? rowTokens.length,
                verified,
                ...(d.note ? { note: d.note } : {}),
              };
            },
            what: 'prepare_hidden_states.py',
            crashType: 'ExtractCrashed',
          },
          offlineHooks({
            host,
            launch,
            hiddenSize,
            python: e.python,
            rowTokens,
            estimateNote: estimate.how,
            redoLimit: e['crash-retries'],
            onVerified: (r, removed) =>
              (verified = `${r.ok.size} files good${removed ? `, ${removed} bad removed` : ''}`),
          }),
        );
        const manifest = {
          samples: input.dataPath,
          layout: `specforge: rows_{k*${e['file-group-size']}}-{(k+1)*${e['file-group-size']}}/data_{i}.ckpt${e.compress ? '.gz' : ''}, i is SpecForge's numbering after its seed-42 shuffle, not a row of the data file`,
          hiddenSize,
          counts: {
            input: result.samples,
            files: result.ok,
            unwritten: result.unwritten,
            beyondRows: result.beyondRows,
          },
          accounting: result.accounting,
          vocabMapping: result.vocabMapping ?? null,
          totalBytes: result.totalBytes,
          totalTokens: result.totalTokens,
          argv,
          launches,
        };
        await host.writeFileAtomic(`${outDir}/manifest.json`, JSON.stringify(manifest, null, 2) + '\n');
        return {
          hidden: {
            dir: outDir,
            layout: 'specforge',
            ...(result.vocabMapping ? { vocabMapping: result.vocabMapping } : {}),
          },
          count: result.ok,
          bytes: result.totalBytes,
          argv,
          outputs: [outDir],
          note:
            `${result.ok} of ${result.samples} samples, ${(result.totalBytes / 2 ** 20).toFixed(1)} MiB in SpecForge's layout` +
            (result.unwritten
              ? `; ${result.unwritten} rows have no feature file (which ones cannot be known; see manifest.json)`
              : '') +
            (launches > 1 ? `; ${launches} launches` : ''),
        };
      } catch (err) {
        throw extractFailure(err);
      } finally {
        stopBeat();
      }
    },
  };
}
