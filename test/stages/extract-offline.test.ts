/**
 * The specforge-offline extract driver against the simulated prepare_hidden_states.py, launched
 * detached through a real LocalHost: SpecForge's layout verified file by file, a file truncated
 * by a crash found and redone, files the script never wrote counted (never named as rows: its
 * files cannot be mapped to rows), the flags of each SpecForge revision, the vocab mapping, and
 * a disk too small refused before anything starts.
 */
import { readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { Host } from '../../src/hosts/host.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { InsufficientSpaceError } from '../../src/stages/common/disk-full.js';
import {
  offlineHooks,
  renderPrepareArgv,
  vocabMappingPath,
  type OfflineResult,
  type PrepareLaunch,
} from '../../src/stages/extract/offline-driver.js';
import { verifyOffline } from '../../src/stages/extract/offline-verify.js';
import { SPECFORGE_PROFILES } from '../../src/stages/common/specforge-revision.js';
import { TrainLaunchError } from '../../src/stages/train/launch.js';
import { superviseJob } from '../../src/stages/common/job-supervise.js';
import { estimateTokens, parseSampleLine, renderForExtraction } from '../../src/stages/common/conversations.js';
import { streamLines } from '../../src/stages/common/host-lines.js';
import { useLocalHost } from '../support/local-host.js';

/** Rows in the data file and a rough token count of each (capped at max-length), the rowTokens a test hands the hooks. */
async function estimateRows(host: Host, dataPath: string, maxLength: number): Promise<number[]> {
  const tokens: number[] = [];
  for await (const { text } of streamLines(host, dataPath)) {
    const parsed = parseSampleLine(text);
    tokens.push(parsed.ok ? Math.min(maxLength, Math.max(1, estimateTokens(renderForExtraction(parsed.sample)))) : 1);
  }
  return tokens;
}

const ROOT = resolve(import.meta.dirname, '../..');
const HIDDEN = 512; // examples/models/sim-llama-8b

const fx = useLocalHost('aerie-offline-', { each: true, sub: 'host' });
let dir: string;
let host: LocalHost;
let data: string;

beforeEach(async () => {
  ({ dir, host } = fx);
  const rows = (await readFile(join(ROOT, 'examples/data/prompts.jsonl'), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .slice(0, 12);
  data = join(dir, 'train.jsonl');
  await writeFile(data, rows.join('\n') + '\n');
});

function launch(over: Partial<PrepareLaunch> = {}): PrepareLaunch {
  return {
    launcher: [process.execPath, join(ROOT, 'bin/aerie-sim.mjs'), 'prepare-hidden-states'],
    targetModelPath: join(ROOT, 'examples/models/sim-llama-8b'),
    draftModelConfig: join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json'),
    dataPath: data,
    outputPath: join(dir, 'hidden'),
    chatTemplate: 'llama3',
    maxLength: 2048,
    tpSize: 1,
    batchSize: 4,
    fileGroupSize: 5,
    compress: false,
    isPreformatted: false,
    extraArgs: [],
    ...over,
  };
}

/** Runs the stage against the simulator imitating `revision` (the cli profile, SpecForge@a6b6b023, unless told). */
async function run(
  env: Record<string, string> = {},
  over: { host?: Host; launch?: PrepareLaunch } = {},
  revision = 'cli',
) {
  const h = over.host ?? host;
  const l = over.launch ?? launch();
  return superviseJob<OfflineResult, unknown>(
    {
      host: h,
      prefix: 'r1.extract.',
      logPath: (gen) => join(dir, `extract-${gen}.log`),
      cwd: dir,
      env: { AERIE_SIM_TIME_SCALE: '0', AERIE_SIM_SPECFORGE_REVISION: revision, ...env },
      crashRetries: 2,
      pollMs: 50,
      heartbeat: () => undefined,
      what: 'prepare_hidden_states.py',
      crashType: 'ExtractCrashed',
    },
    offlineHooks({
      host: h,
      launch: l,
      hiddenSize: HIDDEN,
      python: 'python3',
      rowTokens: await estimateRows(h, data, l.maxLength),
      redoLimit: 2,
    }),
  );
}

describe('specforge-offline extraction on the simulator', () => {
  it("renders the cli revision's flags and writes rows_{k*G}-{(k+1)*G}/data_{i}.ckpt, every file verified, and the vocab mapping", async () => {
    expect(renderPrepareArgv(launch({ compress: true, memFractionStatic: 0.4, distTimeout: 2000 })).slice(3)).toEqual([
      '--target-model-path',
      join(ROOT, 'examples/models/sim-llama-8b'),
      '--draft-model-config',
      join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json'),
      '--data-path',
      data,
      '--output-path',
      join(dir, 'hidden'),
      '--chat-template',
      'llama3',
      '--max-length',
      '2048',
      '--tp-size',
      '1',
      '--batch-size',
      '4',
      '--file-group-size',
      '5',
      '--compress',
      '--sglang-mem-fraction-static',
      '0.4',
      '--dist-timeout',
      '2000',
    ]);
    expect(() => renderPrepareArgv(launch({ extraArgs: ['--output-path=/elsewhere'] }))).toThrow(/sets --output-path/);

    const { result, launches } = await run();
    expect(launches).toBe(1);
    expect(result).toMatchObject({
      samples: 12,
      ok: 12,
      unwritten: 0,
      beyondRows: 0,
      vocabMapping: vocabMappingPath(join(dir, 'hidden')),
    });
    expect(result.accounting).toMatch(
      /12 good feature files for 12 input rows\. .*no file can be mapped back to a sample id/,
    );
    expect((await stat(result.vocabMapping!)).size).toBeGreaterThan(0);
    expect(result.totalTokens).toBeGreaterThan(12);
    for (const [idx, group] of [
      [0, 'rows_0-5'],
      [7, 'rows_5-10'],
      [11, 'rows_10-15'],
    ] as const) {
      expect((await stat(join(dir, 'hidden', group, `data_${idx}.ckpt`))).size).toBeGreaterThan(0);
    }
    const report = await verifyOffline(host, 'python3', join(dir, 'hidden'), HIDDEN);
    expect(report.bad).toEqual([]);
    expect(report.ok.size).toBe(12);
  });

  it('after a crash mid-write, finds the truncated file, deletes it and relaunches; the redo is whole', async () => {
    const once = join(dir, 'crash-once');
    const { result, launches } = await run({ AERIE_SIM_PREPARE_CRASH_AT: '4', AERIE_SIM_FAULT_ONCE: once });
    expect(launches).toBe(2);
    expect(result).toMatchObject({ samples: 12, ok: 12, unwritten: 0 });
    expect(await readFile(join(dir, 'extract-0.log'), 'utf8')).toMatch(/inline_container/);
    const report = await verifyOffline(host, 'python3', join(dir, 'hidden'), HIDDEN);
    expect(report.bad).toEqual([]);
    expect(report.ok.get(4)!.tokens).toBeGreaterThan(0);
  });

  it('on a rerun, a file cut short since is found bad and written again (SpecForge alone would keep it)', async () => {
    await run();
    const victim = join(dir, 'hidden', 'rows_5-10', 'data_6.ckpt');
    const whole = (await stat(victim)).size;
    await truncate(victim, Math.floor(whole / 3));
    expect((await verifyOffline(host, 'python3', join(dir, 'hidden'), HIDDEN)).bad.map((b) => b.path)).toEqual([
      victim,
    ]);
    // A new run of the stage (new launch ids): the sweep before the launch removes it.
    const again = await superviseJob<OfflineResult, unknown>(
      {
        host,
        prefix: 'r2.extract.',
        logPath: (g) => join(dir, `again-${g}.log`),
        cwd: dir,
        env: { AERIE_SIM_TIME_SCALE: '0', AERIE_SIM_SPECFORGE_REVISION: 'cli' },
        crashRetries: 0,
        pollMs: 50,
        heartbeat: () => undefined,
        what: 'x',
        crashType: 'ExtractCrashed',
      },
      offlineHooks({
        host,
        launch: launch(),
        hiddenSize: HIDDEN,
        python: 'python3',
        rowTokens: await estimateRows(host, data, 2048),
        redoLimit: 0,
      }),
    );
    expect(again.result.ok).toBe(12);
    expect((await stat(victim)).size).toBe(whole);
    expect(await readFile(join(dir, 'again-0.log'), 'utf8')).toMatch(
      /Generation loop finished\. Processed: 1, Skipped: 11/,
    );
  });

  it('counts files the script skipped (NaN states) against the rows, naming no row', async () => {
    const { result } = await run({ AERIE_SIM_PREPARE_NAN_EVERY: '5' });
    expect(result).toMatchObject({ samples: 12, ok: 10, unwritten: 2 });
    expect(result.accounting).toMatch(/10 good feature files for 12 input rows \(2 fewer\)\..*NaN states/);
  });

  it('a partial last batch gives no files (drop_last), and the count says so; too few rows for one batch fail plainly', async () => {
    const { result } = await run({}, { launch: launch({ batchSize: 5 }) });
    expect(result).toMatchObject({ samples: 12, ok: 10, unwritten: 2 });
    expect(result.accounting).toMatch(/drop_last \(up to 4 rows per data-parallel rank at --batch-size 5/);
    await rm(join(dir, 'hidden'), { recursive: true });
    const err = await run({}, { launch: launch({ batchSize: 13 }) }).then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toMatch(/wrote no data_\{i\}\.ckpt .* for 12 rows; .*drop_last=True/);
  });

  it('drives a v0.2 revision with --enable-aux-hidden-states and no --draft-model-config; no vocab mapping there', async () => {
    const v020 = launch({ profile: SPECFORGE_PROFILES['v0.2.0'] });
    const argv = renderPrepareArgv(v020);
    expect(argv).toContain('--enable-aux-hidden-states');
    expect(argv).not.toContain('--draft-model-config');
    const { result } = await run({}, { launch: v020 }, 'v0.2.0');
    expect(result).toMatchObject({ samples: 12, ok: 12 });
    expect(result.vocabMapping).toBeUndefined();
  });

  it("the cli revision's --draft-model-config on a v0.2 script: argparse exits 2 and the stage fails", async () => {
    const wrong = await run({}, { launch: launch() }, 'v0.2.0').then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(wrong).not.toBeNull();
    expect(await readFile(join(dir, 'extract-0.log'), 'utf8')).toMatch(
      /error: unrecognized arguments: --draft-model-config/,
    );
  });

  it('refuses what a revision cannot express, naming the field and the fix', () => {
    for (const id of ['v0.2.0', 'v0.2-final-save'] as const) {
      expect(() => renderPrepareArgv(launch({ compress: true, profile: SPECFORGE_PROFILES[id] }))).toThrow(
        TrainLaunchError,
      );
      expect(() => renderPrepareArgv(launch({ compress: true, profile: SPECFORGE_PROFILES[id] }))).toThrow(
        /stages\.extract\.compress: .*only from 7c7ef547.*Set stages\.extract\.compress: false/,
      );
    }
    expect(renderPrepareArgv(launch({ compress: true, profile: SPECFORGE_PROFILES['v0.2-resume'] }))).toContain(
      '--compress',
    );
    expect(() => renderPrepareArgv(launch({ draftModelConfig: '' }))).toThrow(
      /stages\.extract\.draft-model-config: .*needs --draft-model-config/,
    );
    expect(() => renderPrepareArgv(launch({ extraArgs: ['--enable-aux'] }))).toThrow(/sets --enable-aux-hidden-states/);
  });

  it('refuses to launch when the destination cannot hold the estimate, naming both figures', async () => {
    const small: Host = new Proxy(host, {
      get(target, prop, receiver) {
        if (prop === 'freeBytes') return async () => 1_000_000;
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const err = await run({}, { host: small }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(InsufficientSpaceError);
    const e = err as InsufficientSpaceError;
    expect(e.freeBytes).toBe(1_000_000);
    expect(e.neededBytes).toBeGreaterThan(1_000_000);
    expect(e.message).toContain(`${e.neededBytes} bytes`);
    expect(e.message).toContain('(1000000 bytes) are free');
    expect(await host.listLaunches()).toEqual([]);
  });
});
