/**
 * The generate stage's activity: regenerate the training conversations with the target on
 * the generate server, resuming from the shards an earlier attempt wrote.
 */
import { Context } from '@temporalio/activity';
import { DiskFullError } from '../stages/common/index.js';
import type { Host } from '../hosts/host.js';
import { runGenerate, type GenerateJob, type GenerateSummary } from '../stages/generate/index.js';
import { keepHeartbeating, runPaths, transient, type ActivityDeps, type RunRef, type StageOutcome } from './context.js';
import type { ServerLaunch } from './server-types.js';
import { whileServerLives } from './server-watch.js';

export interface GenerateOutcome extends StageOutcome {
  dataPath: string;
  counts: Record<string, number>;
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

/** The stage's job from the run's config, writing on `host` (the target host) and asking the server at baseUrl. */
export function generateJob(host: Host, { config, runId }: RunRef, baseUrl: string): GenerateJob {
  const g = config.stages.generate;
  return {
    host,
    baseUrl,
    model: config.target['model-path'],
    inputPath: g.input,
    outDir: runPaths(host, runId).data,
    temperature: g.temperature,
    maxTokens: g['max-tokens'],
    concurrency: g.concurrency,
    numSamples: g['num-samples'],
    retries: g['request-retries'],
    shardSize: g['shard-size'],
  };
}

/** What the stage records: the outputs, the counts and one line for the board. */
export function generateOutcome(outDir: string, summary: GenerateSummary): GenerateOutcome {
  const c = summary.counts;
  return {
    dataPath: `${outDir}/train.jsonl`,
    counts: { ...c },
    outputs: [`${outDir}/train.jsonl`, `${outDir}/manifest.json`],
    note: `${c.ok} ok, ${c.error} errors, ${c.skipped} skipped, ${c.rejected} rejected of ${c.input}${summary.resumed ? ` (${summary.resumed} from before a resume)` : ''}`,
  };
}

export function generateActivities({ hosts }: ActivityDeps) {
  return {
    async generateData(input: RunRef & { launch: ServerLaunch }): Promise<GenerateOutcome> {
      const { config, runId, launch } = input;
      const host = hosts.get(config);
      const outDir = runPaths(host, runId).data;
      let progress: unknown = { phase: 'starting' };
      const stopBeat = keepHeartbeating(() => progress);
      try {
        const summary = await whileServerLives(host, launch, async (signal) =>
          runGenerate({
            ...generateJob(host, input, await host.httpBase(launch.port)),
            signal,
            onProgress: (p) => (progress = p),
          }),
        );
        return generateOutcome(outDir, summary);
      } catch (err) {
        // Only what is true while waiting for space: the attempt's done count included rows it never wrote.
        throw generateFailure(err, (details) =>
          Context.current().heartbeat({ ...details, total: (progress as { total?: number }).total }),
        );
      } finally {
        stopBeat();
      }
    },
  };
}
