/**
 * Data activities: regenerate the training conversations with the target, then extract
 * the target's hidden states for them with the patched server. Both resume by sample id.
 */
import { Context } from '@temporalio/activity';
import { runGenerate } from '../stages/generate.js';
import { runExtract } from '../stages/extract.js';
import { fatal, keepHeartbeating, runPaths, type ActivityDeps, type RunRef } from './context.js';
import type { ServerLaunch } from './server.js';
import { whileServerLives } from './watch.js';

export interface StageOutcome {
  outputs: string[];
  note: string;
}

export interface GenerateOutcome extends StageOutcome {
  dataPath: string;
  counts: Record<string, number>;
}

export interface ExtractOutcome extends StageOutcome {
  hiddenStatesDir: string;
  count: number;
  bytes: number;
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
            signal,
            onProgress: (p) => (progress = { phase: 'regenerating', ...p }),
          }),
        );
        const c = summary.counts;
        return {
          dataPath: `${outDir}/train.jsonl`,
          counts: { ...c },
          outputs: [`${outDir}/train.jsonl`, `${outDir}/manifest.json`],
          note: `${c.ok} ok, ${c.error} errors, ${c.skipped} skipped, ${c.rejected} rejected of ${c.input}`,
        };
      } finally {
        stopBeat();
      }
    },

    async extractHiddenStates(input: RunRef & { launch: ServerLaunch; dataPath: string }): Promise<ExtractOutcome> {
      const { config, runId, launch } = input;
      const host = hosts.get(config);
      const e = config.stages.extract;
      const hiddenSize = e['hidden-size'] ?? (await modelHiddenSize(host, config.target['model-path']));
      const outDir = runPaths(host, runId).hidden;
      let progress: unknown = { phase: 'starting' };
      const stopBeat = keepHeartbeating(() => progress);
      try {
        const summary = await whileServerLives(host, launch, async (signal) =>
          runExtract({
            host,
            baseUrl: await host.httpBase(launch.port),
            samplesPath: input.dataPath,
            dumpDir: e['dump-dir'],
            outDir,
            hiddenSize,
            concurrency: e.concurrency,
            signal,
            onProgress: (p) => (progress = { phase: 'extracting', ...p }),
          }),
        );
        return {
          hiddenStatesDir: outDir,
          count: summary.counts.ok,
          bytes: summary.totalBytes,
          outputs: [outDir],
          note: `${summary.counts.ok} sequences, ${(summary.totalBytes / 2 ** 20).toFixed(1)} MiB of hidden states${summary.counts.error ? `, ${summary.counts.error} errors` : ''}`,
        };
      } finally {
        stopBeat();
        void Context.current();
      }
    },
  };
}

async function modelHiddenSize(host: import('../hosts/host.js').Host, modelPath: string): Promise<number> {
  try {
    const cfg = JSON.parse((await host.readFile(`${modelPath}/config.json`)).toString('utf8')) as { hidden_size?: number };
    if (typeof cfg.hidden_size === 'number') return cfg.hidden_size;
  } catch {
    // fall through to the error below
  }
  throw fatal('ConfigError', `cannot read hidden_size from ${modelPath}/config.json on ${host.name}; set stages.extract.hidden-size`);
}
