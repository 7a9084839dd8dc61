/**
 * Data activities: regenerate the training conversations with the target, then extract the
 * target's hidden states for them — with the patched server (aerie's dump layout) or with
 * SpecForge's prepare_hidden_states.py (SpecForge's layout, which its trainers read). Both
 * resume by sample id; both refuse to start when the destination cannot hold the estimate.
 */
import { withRunGpus } from '../config/gpus.js';
import { Context } from '@temporalio/activity';
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import {
  EarlySamplesFailedError,
  featureBytesPerToken,
  runExtract,
  extractDumpDir,
  runStockAux,
  SelfCheckFailedError,
  tokenizeSamples,
  TokensDisagreeError,
  offlineHooks,
  type OfflineResult,
  estimateOfflineTokens,
  offlineBytesNeeded,
  type TokenizerOnHost,
} from '../stages/extract/index.js';
import {
  InsufficientSpaceError,
  AeriePyError,
  shipAeriePy,
  streamLines,
  SPECFORGE_PROFILES,
  type SpecforgeProfileId,
  formatBytes,
  DiskFullError,
  JobFailure,
  superviseJob,
} from '../stages/common/index.js';
import { prepareSpec, type HiddenStates } from '../stages/launch-specs.js';
import { runGenerate } from '../stages/generate/index.js';
import type { TrainProgress } from '../stages/train/index.js';
import { TrainLaunchError } from '../stages/train/index.js';
import {
  cancelRequested,
  expandEnv,
  fatal,
  keepHeartbeating,
  runPaths,
  transient,
  type ActivityDeps,
  type RunRef,
} from './context.js';
import type { ServerLaunch } from './server.js';
import { whileServerLives } from './server-watch.js';

export interface StageOutcome {
  outputs: string[];
  note: string;
}

export interface GenerateOutcome extends StageOutcome {
  dataPath: string;
  counts: Record<string, number>;
}

export interface ExtractOutcome extends StageOutcome {
  hidden: HiddenStates;
  count: number;
  bytes: number;
  argv?: string[];
}

/** Errors a retry cannot fix become non-retryable failures with the stage's own words. */
function asFailure(err: unknown): unknown {
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

/**
 * A full disk is retried, unlike the other errors a retry cannot fix: space is freed by an
 * operator or by another job finishing, and each attempt resumes from the shards already
 * written (an attempt with no room for a shard fails before its first request). Temporal's
 * backoff (1 s doubling to 30 s, 20 attempts: about 8 minutes) is the window to free it;
 * after that the run fails, or waits for `aerie retry` with run.on-failure: wait. The
 * heartbeat says "disk full" so `aerie status` and the Web UI show why the stage is waiting.
 */
export function generateFailure(
  err: unknown,
  beat: (details: Record<string, unknown>) => void = () => undefined,
): unknown {
  if (!(err instanceof DiskFullError)) return err;
  const details = { phase: 'disk full', path: err.path, freeBytes: err.freeBytes, wantedBytes: err.wantedBytes };
  beat(details);
  return transient('DiskFull', err.message, details);
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

/** Bytes already under dir (what a resumed extraction does not need again), measured on the host. */
async function bytesUnder(host: Host, dir: string): Promise<number> {
  if (!(await host.stat(dir))) return 0;
  const r = await host.exec(['find', dir, '-type', 'f', '-printf', '%s\\n']);
  return r.code === 0
    ? r.stdout
        .split('\n')
        .filter(Boolean)
        .reduce((s, n) => s + Number(n), 0)
    : 0;
}

export function dataActivities({ hosts }: ActivityDeps) {
  return {
    async generateData(input: RunRef & { launch: ServerLaunch }): Promise<GenerateOutcome> {
      const { config, runId, launch } = input;
      const host = hosts.get(config);
      const g = config.stages.generate;
      const outDir = runPaths(host, runId).data;
      let progress: unknown = { phase: 'starting' };
      const stopBeat = keepHeartbeating(() => progress);
      try {
        const summary = await whileServerLives(host, launch, async (signal) =>
          runGenerate({
            host,
            baseUrl: await host.httpBase(launch.port),
            model: config.target['model-path'],
            inputPath: g.input,
            outDir,
            temperature: g.temperature,
            maxTokens: g['max-tokens'],
            concurrency: g.concurrency,
            numSamples: g['num-samples'],
            retries: g['request-retries'],
            shardSize: g['shard-size'],
            signal,
            onProgress: (p) => (progress = p),
          }),
        );
        const c = summary.counts;
        return {
          dataPath: `${outDir}/train.jsonl`,
          counts: { ...c },
          outputs: [`${outDir}/train.jsonl`, `${outDir}/manifest.json`],
          note: `${c.ok} ok, ${c.error} errors, ${c.skipped} skipped, ${c.rejected} rejected of ${c.input}${summary.resumed ? ` (${summary.resumed} from before a resume)` : ''}`,
        };
      } catch (err) {
        // Only what is true while waiting for space: the attempt's done count included rows it never wrote.
        throw generateFailure(err, (details) =>
          Context.current().heartbeat({ ...details, total: (progress as { total?: number }).total }),
        );
      } finally {
        stopBeat();
      }
    },

    /**
     * Before any extraction launch: will the hidden states fit? The estimate is tokens × 8 × H
     * (whitespace words of each sample as the token count) minus what is already extracted.
     */
    async checkExtractSpace(
      input: RunRef & { dataPath: string },
    ): Promise<{ neededBytes: number; freeBytes: number; note: string }> {
      const { config, runId } = input;
      const host = hosts.get(config);
      const e = config.stages.extract;
      const hiddenSize = e['hidden-size'] ?? (await modelHiddenSize(host, config.target['model-path']));
      const outDir = runPaths(host, runId).hidden;
      const stopBeat = keepHeartbeating(() => ({ phase: 'estimating' }));
      let rows: number[];
      let tokens: number;
      let bytes: number;
      let how = 'whitespace words as tokens';
      try {
        if (e.driver === 'specforge-offline') {
          const est = await estimateOfflineTokens(host, input.dataPath, e['max-length'], offlineTokenizer(config));
          rows = est.tokens;
          how = est.how;
          ({ tokens, bytes } = offlineBytesNeeded(rows, rows.length, e['batch-size'], hiddenSize));
        } else {
          // The exact tokens, made now (before any server loads) and reused by the extraction.
          const py = await shipAeriePy(host, e.python);
          const t = await tokenizeSamples({
            host,
            py,
            samplesPath: input.dataPath,
            outDir,
            modelPath: config.target['model-path'],
            chatTemplate: e['chat-template'],
            maxLength: e['max-length'],
            crossCheck: e['cross-check'],
            trustRemoteCode: config.server['extra-args'].includes('--trust-remote-code'),
          });
          rows = [];
          for await (const { text } of streamLines(host, t.idsPath)) {
            const row = JSON.parse(text) as { input_ids?: unknown[] };
            if (Array.isArray(row.input_ids)) rows.push(row.input_ids.length);
          }
          tokens = rows.reduce((a, b) => a + b, 0);
          bytes = tokens * featureBytesPerToken(hiddenSize);
          how = `tokens from the target's tokenizer (${t.method}), 8 × hidden + 16 bytes each`;
        }
      } catch (err) {
        throw asFailure(err);
      } finally {
        stopBeat();
      }
      const needed = Math.max(0, bytes - (await bytesUnder(host, outDir)));
      await host.mkdirp(outDir);
      const free = await host.freeBytes(outDir);
      if (needed > free) {
        throw fatal(
          'InsufficientSpace',
          `extract needs about ${formatBytes(needed)} (${needed} bytes: ${rows.length} samples, ~${tokens} tokens × 8 × hidden ${hiddenSize}; ${how}) in ${outDir} on ${host.name}, ` +
            `but only ${formatBytes(free)} (${free} bytes) are free; free space or point the extraction at a larger disk`,
          { neededBytes: needed, freeBytes: free },
        );
      }
      return {
        neededBytes: needed,
        freeBytes: free,
        note: `~${formatBytes(needed)} needed, ${formatBytes(free)} free`,
      };
    },

    /**
     * Extraction through a server: aerie's capture plugin (patched-server), or stock SGLang's
     * two passes (stock-server: `pass` aux, then final, each on its own launch).
     */
    async extractHiddenStates(
      input: RunRef & { launch: ServerLaunch; dataPath: string; pass?: 'aux' | 'final' },
    ): Promise<ExtractOutcome> {
      const { config, runId, launch } = input;
      const host = hosts.get(config);
      const e = config.stages.extract;
      if (e.driver === 'specforge-offline')
        throw fatal('ConfigError', 'extractHiddenStates runs a server driver, not specforge-offline');
      const outDir = runPaths(host, runId).hidden;
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
          samplesPath: input.dataPath,
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
        throw asFailure(err);
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
        throw asFailure(err);
      } finally {
        stopBeat();
      }
    },
  };
}

/** The target's tokenizer through the extract stage's interpreter: SpecForge's environment on the host. */
function offlineTokenizer(config: Config): TokenizerOnHost | undefined {
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
