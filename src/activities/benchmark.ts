/**
 * The benchmark stage's activities: one concurrency sweep per variant (the drafter, the
 * target alone), and the report. Each finished level is stored on the host under a key
 * of everything that shapes its numbers, so a retried or resumed sweep continues at the
 * first level without a result, and a baseline measured on the generate stage's server
 * is found again by the benchmark stage.
 */
import type { GateRecord } from '../shared.js';
import { Context } from '@temporalio/activity';
import {
  benchServingBackend,
  benchServingDriver,
  benchServingHost,
  defaultBenchServingLauncher,
} from '../bench/bench-serving.js';
import {
  benchServingDatasetName,
  DatasetError,
  largestLevel,
  levelCategories,
  levelPrompts,
  loadPromptPool,
  promptsPerLevel,
  type PromptPool,
} from '../bench/dataset.js';
import type { BenchServingRecord } from '../bench/metrics.js';
import { REPORT_FILES, renderReport } from '../bench/report-files.js';
import { aggregateRounds, DEFAULT_ROUNDS } from '../bench/rounds.js';
import {
  aerieDriver,
  hostLevelStore,
  levelKey,
  runSweep,
  type MeasureLevel,
  type SweepProgress,
  type Variant,
} from '../bench/sweep.js';
import type { Config } from '../config/schema.js';
import { runGpus } from '../config/gpus.js';
import { runCost, type LaunchTimes, type RunCost } from '../bench/cost.js';
import { runSummary, type RunSummary } from '../bench/summary.js';
import type { Host } from '../hosts/host.js';
import { SglangClient, avgSpecAcceptLength } from '../sglang/client.js';
import { vllmAerieDriver } from './benchmark-vllm.js';
import { fatal, keepHeartbeating, runPaths, type ActivityDeps, type RunRef } from './context.js';
import type { ServerLaunch } from './server.js';
import { whileServerLives } from './server-watch.js';

export type { Variant } from '../bench/sweep.js';
export { promptsPerLevel } from '../bench/dataset.js';

export interface SweepResult {
  records: BenchServingRecord[];
  /** What the report should say about how this sweep was taken. */
  notes: string[];
}

export interface ReportResult {
  markdown: string;
  table: string;
  /** The verdict, crossover, GPU-hours and SIMULATED label (src/bench/summary.ts), for `aerie status` and `aerie compare`. */
  summary?: RunSummary;
  /** The deploy stage's acceptance gate, kept with the report in the benchmark's ledger record (gate-prompts.ts). */
  gate?: GateRecord;
  /** report.md, report.html, results.jsonl on the host. */
  paths: string[];
  host: string;
  dir: string;
}

/** Everything that shapes a level's numbers, apart from the concurrency itself. */
async function levelSettingsKey(host: Host, config: Config, variant: Variant, drafterDir?: string): Promise<string> {
  const b = config.stages.benchmark;
  const s = config.server;
  const drafter = drafterDir
    ? { path: drafterDir, mtimeMs: (await host.stat(drafterDir).catch(() => null))?.mtimeMs ?? null }
    : null;
  return levelKey({
    // Bumped when a figure's definition changes, so a level stored under the old one is
    // measured again: 2 = numpy percentiles, chat timing per the server's bench_serving
    // release, bench_serving's input token count (src/bench/metrics.ts, bench-rules.ts);
    // 3 = rounds of max(8, C) prompts, both accept lengths, categories (src/bench/rounds.ts).
    // The round count is not in the key: each round is stored on its own, so more rounds
    // reuse the ones already taken.
    definitions: 3,
    variant,
    model: config.target['model-path'],
    server: {
      launcher: s.launcher,
      tp: s['tp-size'],
      mem: s['mem-fraction-static'] ?? null,
      extra: s['extra-args'],
      env: s.env,
    },
    deploy: variant === 'eagle3' ? config.stages.deploy : null,
    drafter,
    driver: b.driver,
    benchServing: b.driver === 'bench-serving' ? b['bench-serving'] : null,
    api: b.api,
    dataset: b.dataset,
    datasetPath: b['dataset-path'] ?? null,
    heldOut:
      b.dataset === 'held-out'
        ? { input: config.stages.generate.input, skip: config.stages.generate['num-samples'] ?? null }
        : null,
    inputLen: b['input-len'],
    outputLen: b['output-len'],
    warmup: b.warmup,
    seed: b.seed,
    perLevel: b['prompts-per-level'] ?? null,
  });
}

/** Rounds per level: stages.benchmark.rounds (a config from before the field reads as DEFAULT_ROUNDS). */
export function benchRounds(config: Config): number {
  const r = config.stages.benchmark.rounds as number | undefined;
  return typeof r === 'number' && r >= 1 ? Math.floor(r) : DEFAULT_ROUNDS;
}

async function promptPool(host: Host, config: Config): Promise<PromptPool> {
  try {
    return await loadPromptPool(host, config, benchRounds(config));
  } catch (err) {
    if (err instanceof DatasetError) throw fatal('ConfigError', err.message);
    throw err;
  }
}

function poolNotes(pool: PromptPool, config: Config): string[] {
  const need = largestLevel(config.stages.benchmark) * benchRounds(config);
  if (pool.kind === 'random' || pool.prompts.length >= need) return [];
  return [
    `The ${pool.kind} prompt set has ${pool.prompts.length} distinct prompts; levels needing more (up to ${need}) repeat them in order.`,
  ];
}

function measureFor(
  host: Host,
  config: Config,
  launch: ServerLaunch,
  variant: Variant,
  dir: string,
  baseUrl: string,
  pool: PromptPool,
): MeasureLevel {
  const b = config.stages.benchmark;
  const client = new SglangClient(baseUrl, { timeoutMs: 60_000 });
  if (b.driver === 'bench-serving') {
    const launcher =
      b['bench-serving'].launcher ?? defaultBenchServingLauncher(config.server.launcher, launch.sglangVersion);
    if (!launcher) {
      throw fatal(
        'ConfigError',
        `driver bench-serving: cannot tell how to run bench_serving from server.launcher ${JSON.stringify(config.server.launcher)}; set stages.benchmark.bench-serving.launcher, e.g. [/opt/venv/bin/python, -m, sglang.bench_serving]`,
      );
    }
    return benchServingDriver({
      host,
      dir,
      variant,
      control: client,
      timeoutMs: b['bench-serving'].timeout,
      level: {
        launcher,
        api: b.api,
        host: benchServingHost(config.server['listen-host']),
        port: launch.port,
        outputLen: b['output-len'],
        inputLen: b['input-len'],
        datasetName: benchServingDatasetName(pool.kind),
        warmup: b.warmup,
        seed: b.seed,
        model: config.target['model-path'],
        extraArgs: b['bench-serving']['extra-args'],
      },
    });
  }
  if (launch.engine === 'vllm') return vllmAerieDriver(config, variant, baseUrl, pool);
  return aerieDriver({
    baseUrl,
    api: b.api,
    outputLen: b['output-len'],
    warmup: b.warmup,
    model: config.target['model-path'],
    control: client,
    acceptLengthFrom: variant === 'eagle3' ? avgSpecAcceptLength : undefined,
    serverVersion: launch.sglangVersion,
    meta: {
      backend: benchServingBackend(b.api),
      datasetName: benchServingDatasetName(pool.kind),
      randomInputLen: b['input-len'],
      randomOutputLen: b['output-len'],
      randomRangeRatio: pool.kind === 'random' ? 1 : undefined,
      sharegptOutputLen: pool.kind === 'random' ? undefined : b['output-len'],
    },
  });
}

function settingsLines(config: Config, pool: PromptPool): string[] {
  const b = config.stages.benchmark;
  const d = config.stages.deploy;
  const load =
    b.driver === 'bench-serving'
      ? `Load: python -m sglang.bench_serving on the host per level (--request-rate inf --max-concurrency C), its JSONL ingested; /flush_cache before each level.`
      : `Load: aerie's closed loop (C requests in flight until the level's prompts run out), ${b.warmup} uncounted warmup request(s), then /flush_cache, per level.`;
  if (config.server.engine === 'vllm')
    return [
      `Engine: vLLM (server.engine vllm); the release each server reported (GET /version) is in its startup record beside the server log.`,
      `Load: aerie's closed loop (C requests in flight until the level's prompts run out), ${b.warmup} uncounted warmup request(s) per level; no cache flush (vLLM's /reset_prefix_cache is dev-mode only).`,
      `API: /v1/chat/completions (vllm bench serve backend openai-chat), greedy, EOS ignored, ${b['output-len']} output tokens per request; accept length per level from vLLM's /metrics counters read just before and after the level's measured requests (1 + Δaccepted / Δdrafts).`,
      ...settingsTail(config, pool),
    ];
  return [
    `Engine: SGLang (server.engine sglang), the release preflight resolved (server.sglang-version).`,
    load,
    `API: ${b.api === 'generate' ? '/generate (bench_serving backend sglang)' : '/v1/chat/completions (bench_serving backend sglang-oai-chat)'}, greedy, EOS ignored, ${b['output-len']} output tokens per request.`,
    ...settingsTail(config, pool),
  ];
}

function settingsTail(config: Config, pool: PromptPool): string[] {
  const b = config.stages.benchmark;
  const d = config.stages.deploy;
  return [
    `Prompts: ${pool.kind} — ${pool.source}; ${b['prompts-per-level'] ?? 'max(16, 2 × concurrency)'} requests per level, the same for both variants.`,
    `Target ${config.target['model-path']} on ${config.target.host}, tp ${config.server['tp-size']}; speculative: ${d['speculative-algorithm']}${d['num-steps'] ? `, steps ${d['num-steps']}` : ''}${d['eagle-topk'] ? `, topk ${d['eagle-topk']}` : ''}${d['num-draft-tokens'] ? `, draft tokens ${d['num-draft-tokens']}` : ''}.`,
  ];
}

/** The run's launches on the host with their end times (the exit file's mtime), as GPU-hours. */
async function launchCost(host: Host, runId: string, hostGpus: readonly number[] | undefined): Promise<RunCost> {
  const launches: LaunchTimes[] = [];
  for (const record of await host.listLaunches()) {
    if (!record.launchId.startsWith(`${runId}.`)) continue;
    const exit = await host.stat(record.exitPath).catch(() => null);
    launches.push({ record, endedAtMs: exit?.mtimeMs });
  }
  return runCost(runId, launches, hostGpus);
}

export function benchmarkActivities({ hosts }: ActivityDeps) {
  return {
    /** One variant's sweep against a ready server; levels stored by an earlier attempt are not measured again. */
    async benchmarkSweep(input: RunRef & { launch: ServerLaunch; variant: Variant }): Promise<SweepResult> {
      const { config, runId, launch, variant } = input;
      const b = config.stages.benchmark;
      const host = hosts.get(config);
      const dir = runPaths(host, runId).bench;
      await host.mkdirp(dir);
      const pool = await promptPool(host, config);
      const key = await levelSettingsKey(
        host,
        config,
        variant,
        variant === 'eagle3' ? launch.speculative?.draftModelPath : undefined,
      );
      const baseUrl = await host.httpBase(launch.port);
      let beat: SweepProgress | { variant: Variant } = { variant };
      const stopBeat = keepHeartbeating(() => beat);
      const ctx = Context.current();
      // A level starting or ending is worth a heartbeat now; request counts ride the 5 s beat.
      const onProgress = (p: SweepProgress): void => {
        const prev = beat as Partial<SweepProgress>;
        beat = p;
        if (p.level !== prev.level || p.finished.length !== prev.finished?.length) ctx.heartbeat(p);
      };
      try {
        const records = await whileServerLives(host, launch, (signal) =>
          runSweep({
            variant,
            concurrencies: b.concurrencies,
            rounds: benchRounds(config),
            promptsFor: (c, round) =>
              levelPrompts(pool, promptsPerLevel(c, b['prompts-per-level']), b['input-len'], b.seed + c, round),
            categoriesFor: (c, round) => levelCategories(pool, promptsPerLevel(c, b['prompts-per-level']), round),
            store: hostLevelStore(host, dir, variant, key),
            measure: measureFor(host, config, launch, variant, dir, baseUrl, pool),
            signal,
            onProgress,
          }),
        );
        return { records, notes: poolNotes(pool, config) };
      } finally {
        stopBeat();
      }
    },

    /** The levels of a variant already stored (e.g. a baseline taken on the generate server), and the ones still missing. */
    async storedSweep(
      input: RunRef & { variant: Variant; drafterDir?: string },
    ): Promise<{ records: BenchServingRecord[]; missing: number[] }> {
      const { config, runId, variant } = input;
      const host = hosts.get(config);
      const dir = runPaths(host, runId).bench;
      const store = hostLevelStore(host, dir, variant, await levelSettingsKey(host, config, variant, input.drafterDir));
      const records: BenchServingRecord[] = [];
      const missing: number[] = [];
      const rounds = benchRounds(config);
      for (const c of config.stages.benchmark.concurrencies) {
        const taken: BenchServingRecord[] = [];
        for (let round = 0; round < rounds; round++) {
          const r = await store.read(c, round);
          if (!r) break;
          taken.push(r);
        }
        if (taken.length === rounds) records.push(aggregateRounds(taken));
        else missing.push(c);
      }
      return { records, missing };
    },

    /** report.md, report.html and results.jsonl in the run's bench folder on the host. */
    async writeReport(
      input: RunRef & {
        speculative: BenchServingRecord[];
        baseline?: BenchServingRecord[];
        notes: string[];
        gate?: GateRecord;
      },
    ): Promise<ReportResult> {
      const { config, runId } = input;
      const host = hosts.get(config);
      const dir = runPaths(host, runId).bench;
      await host.mkdirp(dir);
      const label = config.stages.deploy['speculative-algorithm'];
      const pool = await promptPool(host, config).catch(
        () => ({ kind: config.stages.benchmark.dataset, prompts: [], source: '(unreadable now)' }) as PromptPool,
      );
      const cost = await launchCost(host, runId, runGpus(config)).catch(() => undefined);
      const reportInput = {
        title: `aerie run ${runId}: ${label} drafter vs the target alone`,
        speculativeLabel: label,
        speculative: input.speculative,
        baseline: input.baseline,
        notes: [...new Set(input.notes)],
        settings: settingsLines(config, pool),
        cost,
      };
      const report = await renderReport(reportInput);
      const paths: string[] = [];
      for (const name of REPORT_FILES) {
        await host.writeFileAtomic(`${dir}/${name}`, report.files[name]);
        paths.push(`${dir}/${name}`);
      }
      return {
        markdown: report.files['report.md'],
        table: report.table,
        summary: runSummary(reportInput),
        ...(input.gate ? { gate: input.gate } : {}),
        paths,
        host: host.name,
        dir,
      };
    },
  };
}
