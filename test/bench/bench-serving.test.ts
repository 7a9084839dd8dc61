import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  benchServingHost,
  benchServingArgv,
  benchServingDriver,
  defaultBenchServingLauncher,
  ingestBenchServingLine,
  lastLine,
  shareGptDataset,
} from '../../src/bench/bench-serving.js';
import { parseJsonLine } from '../../src/bench/python-json.js';
import { AERIE_EXTRA_KEYS, BENCH_SERVING_KEYS, LATER_BENCH_SERVING_KEYS } from '../../src/bench/metrics.js';
import { LINE_054, LINE_059, LINE_0523 } from './bench-serving-lines.js';
import { useLocalHost } from '../support/local-host.js';

// A line as `python -m sglang.bench_serving --output-file` appends it: Python's json.dumps
// separators, the default request rate float("inf") as a bare Infinity.
const LINE =
  '{"backend": "sglang", "dataset_name": "random", "request_rate": Infinity, "max_concurrency": 8, "sharegpt_output_len": null, ' +
  '"random_input_len": 1024, "random_output_len": 256, "random_range_ratio": 1.0, "duration": 12.93741516699083, "completed": 80, ' +
  '"total_input_tokens": 81920, "total_output_tokens": 20480, "total_output_tokens_retokenized": 20467, "request_throughput": 6.183613316212889, ' +
  '"input_throughput": 6332.020035802, "output_throughput": 1583.0050089505, "mean_e2e_latency_ms": 1289.4411037492, ' +
  '"median_e2e_latency_ms": 1283.1210840004, "std_e2e_latency_ms": 41.62018225, "p99_e2e_latency_ms": 1386.10344, "mean_ttft_ms": 61.9251, ' +
  '"median_ttft_ms": 48.1208, "std_ttft_ms": 31.20001, "p99_ttft_ms": 161.2921, "mean_tpot_ms": 4.8147, "median_tpot_ms": 4.8074, ' +
  '"std_tpot_ms": 0.0915, "p99_tpot_ms": 5.0817, "mean_itl_ms": 4.8147, "median_itl_ms": 4.5062, "std_itl_ms": 3.1402, "p95_itl_ms": 8.9101, ' +
  '"p99_itl_ms": 13.7216, "concurrency": 7.973, "accept_length": 3.21}';

describe('ingesting bench_serving output', () => {
  it('reads a realistic line, bare Infinity included, into a record with every bench_serving key', () => {
    const r = ingestBenchServingLine(LINE, 80, '2026-01-01T00:00:00.000Z');
    expect(Object.keys(r)).toEqual([...BENCH_SERVING_KEYS, ...LATER_BENCH_SERVING_KEYS, ...AERIE_EXTRA_KEYS]);
    expect(r.request_rate).toBe(Infinity);
    expect(r.max_concurrency).toBe(8);
    expect(r.output_throughput).toBe(1583.0050089505);
    expect(r.total_output_tokens_retokenized).toBe(20467);
    expect(r.accept_length).toBe(3.21);
    expect(r.sharegpt_output_len).toBeNull();
    expect(r.errors).toBe(0);
    expect(r.p90_ttft_ms).toBeNull(); // this line has none, so none is made up
    expect(r.mean_accept_length_per_request).toBeNull();
    expect(r.total_input_tokens_server).toBeNull();
    expect(r.started_at).toBe('2026-01-01T00:00:00.000Z');
  });

  it('keeps --output-details error messages (not the arrays) and counts failures from --num-prompts', () => {
    const details = LINE.replace(
      '"accept_length": 3.21}',
      '"accept_length": 3.21, "input_lens": [1024, 1024], "output_lens": [256, 0], "ttfts": [0.05, 0.0], "itls": [[0.004], []], ' +
        '"generated_texts": ["a", ""], "errors": ["", "Traceback (most recent call last):\\n  ...\\naiohttp.ClientPayloadError: Response payload is not completed"]}',
    );
    const r = ingestBenchServingLine(details, 82, 't');
    expect(r.errors).toBe(2);
    expect(r.error_samples).toEqual(['aiohttp.ClientPayloadError: Response payload is not completed']);
    expect(r).not.toHaveProperty('itls');
    // The small --output-details arrays are kept as written; generated_texts and itls are left to the host's file.
    expect(r.bench_serving_other_fields).toEqual({
      input_lens: [1024, 1024],
      output_lens: [256, 0],
      ttfts: [0.05, 0.0],
      errors: [
        '',
        'Traceback (most recent call last):\n  ...\naiohttp.ClientPayloadError: Response payload is not completed',
      ],
    });
  });

  // Every key each release writes reaches the record with the value written (S3).
  for (const [release, line] of [
    ['0.5.4', LINE_054],
    ['0.5.9', LINE_059],
    ['0.5.23', LINE_0523],
  ] as const) {
    it(`keeps every field bench_serving ${release} writes, under its own name`, () => {
      const raw = parseJsonLine(line) as Record<string, unknown>;
      const r = ingestBenchServingLine(line, 24, 't') as unknown as Record<string, unknown>;
      for (const [k, v] of Object.entries(raw)) expect(r[k], `${release} ${k}`).toEqual(v);
      expect(r.bench_serving_other_fields, release).toBeNull();
    });
  }

  it('0.5.4 has no p90s and 0.5.9 only the E2E one: the rest stay null; 0.5.23 gives them all, with tag and server_info', () => {
    const p9x = [
      'p90_e2e_latency_ms',
      'p95_e2e_latency_ms',
      'p90_ttft_ms',
      'p95_ttft_ms',
      'p90_tpot_ms',
      'p95_tpot_ms',
      'p90_itl_ms',
    ] as const;
    const r054 = ingestBenchServingLine(LINE_054, 24, 't');
    for (const k of p9x) expect(r054[k], k).toBeNull();
    expect(r054.server_info).toBeNull();
    expect(r054.p95_itl_ms).toBe((parseJsonLine(LINE_054) as Record<string, number>).p95_itl_ms);
    const r059 = ingestBenchServingLine(LINE_059, 24, 't');
    expect(r059.p90_e2e_latency_ms).toBe((parseJsonLine(LINE_059) as Record<string, number>).p90_e2e_latency_ms);
    for (const k of p9x.slice(1)) expect(r059[k], k).toBeNull();
    expect(r059.max_concurrent_requests).toBe(4);
    const raw = parseJsonLine(LINE_0523) as Record<string, unknown>;
    const r0523 = ingestBenchServingLine(LINE_0523, 24, 't');
    for (const k of p9x) expect(r0523[k], k).toBe(raw[k]);
    expect(r0523.tag).toBe('run-a');
    expect(r0523.server_info).toEqual({ version: '0.5.23', internal_states: [{ avg_spec_accept_length: 2.75 }] });
    expect(r0523.total_throughput).toBe(raw.total_throughput);
  });

  it('keeps keys no release list names (goodput, cache_report) under bench_serving_other_fields', () => {
    const line = LINE_0523.replace(
      /}$/,
      ', "cache_report": {"total_prompt_tokens": 1152, "cache_hit_rate_pct": 12.5}, "request_goodput": 1.5}',
    );
    const r = ingestBenchServingLine(line, 24, 't');
    expect(r.bench_serving_other_fields).toEqual({
      cache_report: { total_prompt_tokens: 1152, cache_hit_rate_pct: 12.5 },
      request_goodput: 1.5,
    });
  });

  it('accepts an older line without accept_length and concurrency, and refuses something else', () => {
    const old = LINE.replace(', "concurrency": 7.973, "accept_length": 3.21}', '}');
    const r = ingestBenchServingLine(old, 80, 't');
    expect(r.accept_length).toBeNull();
    expect(r.concurrency).toBeNull();
    expect(() => ingestBenchServingLine('{"backend": "sglang"}', 1, 't')).toThrow(/lacks .*duration/);
    expect(() => ingestBenchServingLine('Traceback', 1, 't')).toThrow(/not JSON/);
    expect(lastLine(`${LINE}\n${old}\n\n`)).toBe(old);
  });
});

describe('bench_serving command lines', () => {
  it('runs through the server interpreter by default', () => {
    expect(defaultBenchServingLauncher(['/opt/venv/bin/python', '-m', 'sglang.launch_server'])).toEqual([
      '/opt/venv/bin/python',
      '-m',
      'sglang.bench_serving',
    ]);
    expect(defaultBenchServingLauncher(['aerie-sim.mjs', 'sglang'])).toBeUndefined();
    // S18: where sglang.bench_serving is a deprecated alias, its new module; 0.5.12 has only the old one.
    expect(defaultBenchServingLauncher(['/opt/venv/bin/python', '-m', 'sglang.launch_server'], '0.5.23')).toEqual([
      '/opt/venv/bin/python',
      '-m',
      'sglang.benchmark.serving',
    ]);
    expect(defaultBenchServingLauncher(['/opt/venv/bin/python', '-m', 'sglang.launch_server'], '0.5.12')).toEqual([
      '/opt/venv/bin/python',
      '-m',
      'sglang.bench_serving',
    ]);
  });

  it('random levels pin the lengths; conversation levels fix the output length', () => {
    const base = {
      launcher: ['python3', '-m', 'sglang.bench_serving'],
      api: 'generate' as const,
      host: '127.0.0.1',
      port: 30000,
      concurrency: 10,
      numPrompts: 20,
      outputLen: 256,
      inputLen: 128,
      datasetPath: '/w/d.json',
      outputFile: '/w/o.jsonl',
      warmup: 1,
      seed: 3,
      model: '/models/llama',
      extraArgs: ['--disable-ignore-eos'],
    };
    expect(benchServingArgv({ ...base, datasetName: 'random' })).toEqual([
      'python3',
      '-m',
      'sglang.bench_serving',
      '--backend',
      'sglang',
      '--host',
      '127.0.0.1',
      '--port',
      '30000',
      '--model',
      '/models/llama',
      '--dataset-name',
      'random',
      '--dataset-path',
      '/w/d.json',
      '--num-prompts',
      '20',
      '--max-concurrency',
      '10',
      '--request-rate',
      'inf',
      '--seed',
      '3',
      '--output-file',
      '/w/o.jsonl',
      '--disable-tqdm',
      '--random-input-len',
      '128',
      '--random-output-len',
      '256',
      '--random-range-ratio',
      '1.0',
      '--disable-ignore-eos',
    ]);
    const chat = benchServingArgv({ ...base, api: 'chat', datasetName: 'sharegpt', warmup: 3 });
    expect(chat.slice(3, 5)).toEqual(['--backend', 'sglang-oai-chat']);
    expect(chat.join(' ')).toContain('--sharegpt-output-len 256 --warmup-requests 3');
    // A server in its own network namespace listens on the container's address; a wildcard means loopback will do.
    expect(benchServingArgv({ ...base, host: '10.231.0.2', datasetName: 'random' }).slice(5, 7)).toEqual([
      '--host',
      '10.231.0.2',
    ]);
    expect([benchServingHost('0.0.0.0'), benchServingHost('::'), benchServingHost('10.231.0.2')]).toEqual([
      '127.0.0.1',
      '::1',
      '10.231.0.2',
    ]);
    expect(JSON.parse(shareGptDataset(['p1']))).toEqual([
      {
        conversations: [
          { from: 'human', value: 'p1' },
          { from: 'gpt', value: 'placeholder answer' },
        ],
      },
    ]);
  });
});

describe('benchServingDriver on a host', () => {
  const local = useLocalHost('aerie-bs-');
  let fake: string;

  beforeAll(async () => {
    // Stands in for bench_serving: checks its dataset, appends a result line, or fails like Python.
    fake = join(local.dir, 'fake-bench-serving.mjs');
    await writeFile(
      fake,
      `import { readFileSync, appendFileSync } from 'node:fs';
const a = process.argv.slice(2);
const arg = (k) => a[a.indexOf(k) + 1];
if (a.includes('--fail')) { console.error('Traceback (most recent call last):\\nModuleNotFoundError: No module named \\'sglang\\''); process.exit(1); }
const data = JSON.parse(readFileSync(arg('--dataset-path'), 'utf8'));
const line = ${JSON.stringify(LINE)}.replace('"max_concurrency": 8', '"max_concurrency": ' + arg('--max-concurrency')).replace('"completed": 80', '"completed": ' + data.length);
appendFileSync(arg('--output-file'), line + '\\n');
`,
    );
  });

  const level = (extraArgs: string[]) => ({
    launcher: [process.execPath, fake],
    api: 'generate' as const,
    host: '127.0.0.1',
    port: 1,
    outputLen: 16,
    inputLen: 8,
    datasetName: 'sharegpt' as const,
    warmup: 1,
    seed: 1,
    model: '/m',
    extraArgs,
  });

  it('writes the level dataset, flushes, runs it and ingests its line', async () => {
    let flushes = 0;
    const { dir, host } = local;
    const measure = benchServingDriver({
      host,
      dir,
      variant: 'eagle3',
      control: { flushCache: async () => void flushes++ },
      level: level([]),
      timeoutMs: 30_000,
    });
    const progress: number[] = [];
    const r = await measure({ concurrency: 4, prompts: ['a', 'b', 'c'], onProgress: (d) => progress.push(d) });
    expect(flushes).toBe(1);
    expect(r.max_concurrency).toBe(4);
    expect(r.completed).toBe(3);
    expect(r.errors).toBe(0);
    expect(progress).toEqual([3]);
    const dataset = JSON.parse(
      await readFile(join(dir, 'bench_serving', 'eagle3-c4-r0.dataset.json'), 'utf8'),
    ) as unknown[];
    expect(dataset).toHaveLength(3);
    expect(await readFile(join(dir, 'bench_serving', 'eagle3-c4-r0.log'), 'utf8')).toContain('--max-concurrency 4');
  });

  it('fails with the tail of its output when bench_serving fails', async () => {
    const { dir, host } = local;
    const measure = benchServingDriver({
      host,
      dir,
      variant: 'baseline',
      control: { flushCache: async () => undefined },
      level: level(['--fail']),
      timeoutMs: 30_000,
    });
    await expect(measure({ concurrency: 2, prompts: ['a'], onProgress: () => undefined })).rejects.toThrow(
      /exited with 1.*\n[\s\S]*No module named 'sglang'/,
    );
  });
});
