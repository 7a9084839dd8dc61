/**
 * The benchmark sweep and the report. Each finished level is saved on the host, so a
 * retried sweep continues at the first level that has no result yet.
 */
import { Context } from '@temporalio/activity';
import { formatJsonLine, parseJsonLine } from '../bench/jsonl.js';
import { runLevel } from '../bench/loadgen.js';
import { summarizeLevel, type BenchServingRecord } from '../bench/metrics.js';
import { randomPrompts } from '../bench/prompts.js';
import { renderReportMarkdown, renderReportTable } from '../bench/report.js';
import { SglangClient, avgSpecAcceptLength } from '../sglang/client.js';
import { runPaths, type ActivityDeps, type RunRef } from './context.js';
import type { ServerLaunch } from './server.js';
import { whileServerLives } from './watch.js';

export type Variant = 'eagle3' | 'baseline';

export function promptsPerLevel(concurrency: number, configured?: number): number {
  return configured ?? Math.max(16, 2 * concurrency);
}

export function benchmarkActivities({ hosts }: ActivityDeps) {
  return {
    async benchmarkSweep(input: RunRef & { launch: ServerLaunch; variant: Variant }): Promise<{ records: BenchServingRecord[] }> {
      const { config, runId, launch, variant } = input;
      const b = config.stages.benchmark;
      const host = hosts.get(config);
      const dir = runPaths(host, runId).bench;
      await host.mkdirp(dir);
      const baseUrl = await host.httpBase(launch.port);
      const client = new SglangClient(baseUrl, { timeoutMs: 60_000 });
      const ctx = Context.current();
      const records: BenchServingRecord[] = [];
      let beat: Record<string, unknown> = { variant };
      const timer = setInterval(() => ctx.heartbeat(beat), 5000);
      try {
        for (const concurrency of b.concurrencies) {
          const path = `${dir}/${variant}-c${concurrency}.json`;
          if (await host.stat(path)) {
            records.push(parseJsonLine((await host.readFile(path)).toString('utf8').trim()) as BenchServingRecord);
            continue;
          }
          const n = promptsPerLevel(concurrency, b['prompts-per-level']);
          const prompts = randomPrompts(n, b['input-len'], b.seed + concurrency);
          beat = { variant, concurrency, done: 0, total: n };
          ctx.heartbeat(beat);
          const record = await whileServerLives(host, launch, async (signal) => {
            // A flush before each level makes the server's running accept length cover this level only.
            await client.flushCache(signal).catch(() => undefined);
            const run = await runLevel({
              baseUrl,
              api: b.api,
              prompts,
              concurrency,
              outputLen: b['output-len'],
              warmup: b.warmup,
              signal,
              model: config.target['model-path'],
              onProgress: (done, total) => (beat = { variant, concurrency, done, total }),
            });
            const info = await client.serverInfo(signal).catch(() => ({}));
            return summarizeLevel(run, {
              backend: 'sglang',
              datasetName: 'random',
              randomInputLen: b['input-len'],
              randomOutputLen: b['output-len'],
              acceptLength: variant === 'eagle3' ? avgSpecAcceptLength(info) : undefined,
            });
          });
          await host.writeFileAtomic(path, formatJsonLine(record) + '\n');
          records.push(record);
          ctx.heartbeat({ variant, concurrency, finished: true, outputThroughput: record.output_throughput });
        }
        return { records };
      } finally {
        clearInterval(timer);
      }
    },

    async writeReport(
      input: RunRef & { speculative: BenchServingRecord[]; baseline?: BenchServingRecord[]; notes: string[] },
    ): Promise<{ markdown: string; table: string; paths: string[] }> {
      const { config, runId } = input;
      const host = hosts.get(config);
      const dir = runPaths(host, runId).bench;
      const report = {
        title: `aerie run ${runId}: ${config.stages.deploy['speculative-algorithm']} vs target alone`,
        speculative: input.speculative,
        baseline: input.baseline,
        notes: input.notes,
      };
      const markdown = renderReportMarkdown(report);
      const table = renderReportTable(report);
      // Payloads carry JSON, where bench_serving's request_rate=Infinity became null: restore it.
      const line = (r: BenchServingRecord, variant: string) => formatJsonLine({ ...r, request_rate: r.request_rate ?? Infinity, aerie_variant: variant });
      const lines = [...(input.baseline ?? []).map((r) => line(r, 'baseline')), ...input.speculative.map((r) => line(r, 'eagle3'))];
      await host.writeFileAtomic(`${dir}/report.md`, markdown);
      await host.writeFileAtomic(`${dir}/results.jsonl`, lines.join('\n') + '\n');
      return { markdown, table, paths: [`${dir}/report.md`, `${dir}/results.jsonl`] };
    },
  };
}
