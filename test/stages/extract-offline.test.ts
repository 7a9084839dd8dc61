/**
 * The specforge-offline extract driver against the simulated prepare_hidden_states.py, launched
 * detached through a real LocalHost: SpecForge's layout verified file by file, a file truncated
 * by a crash found and redone, rows the script drops accounted for, and a disk too small
 * refused before anything starts.
 */
import { mkdtemp, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Host } from '../../src/hosts/host.js';
import { LocalHost } from '../../src/hosts/local.js';
import { InsufficientSpaceError } from '../../src/stages/extract.js';
import { estimateRows, offlineHooks, renderPrepareArgv, verifyOffline, type OfflineResult, type PrepareLaunch } from '../../src/stages/extract-offline.js';
import { superviseJob } from '../../src/stages/job-supervise.js';

const ROOT = resolve(import.meta.dirname, '../..');
const HIDDEN = 512; // examples/models/sim-llama-8b

let dir: string;
let host: LocalHost;
let data: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aerie-offline-'));
  host = new LocalHost({ name: 'local', workdir: join(dir, 'host') });
  const rows = (await readFile(join(ROOT, 'examples/data/prompts.jsonl'), 'utf8')).split('\n').filter(Boolean).slice(0, 12);
  data = join(dir, 'train.jsonl');
  await writeFile(data, rows.join('\n') + '\n');
});

afterEach(async () => {
  for (const r of await host.listLaunches()) await host.killGroup(r, { graceMs: 1000 }).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
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

async function run(env: Record<string, string> = {}, over: { host?: Host; launch?: PrepareLaunch } = {}) {
  const h = over.host ?? host;
  const l = over.launch ?? launch();
  return superviseJob<OfflineResult, unknown>(
    {
      host: h,
      prefix: 'r1.extract.',
      logPath: (gen) => join(dir, `extract-${gen}.log`),
      cwd: dir,
      env: { AERIE_SIM_TIME_SCALE: '0', ...env },
      crashRetries: 2,
      pollMs: 50,
      heartbeat: () => undefined,
      what: 'prepare_hidden_states.py',
      crashType: 'ExtractCrashed',
    },
    offlineHooks({ host: h, launch: l, hiddenSize: HIDDEN, python: 'python3', rowTokens: await estimateRows(h, data, l.maxLength), redoLimit: 2 }),
  );
}

describe('specforge-offline extraction on the simulator', () => {
  it('renders the v0.2 flags and writes rows_{k*G}-{(k+1)*G}/data_{i}.ckpt, every file verified', async () => {
    expect(renderPrepareArgv(launch({ compress: true, memFractionStatic: 0.4, distTimeout: 2000 })).slice(3)).toEqual([
      '--target-model-path', join(ROOT, 'examples/models/sim-llama-8b'),
      '--draft-model-config', join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json'),
      '--data-path', data,
      '--output-path', join(dir, 'hidden'),
      '--chat-template', 'llama3', '--max-length', '2048', '--tp-size', '1', '--batch-size', '4', '--file-group-size', '5',
      '--compress', '--sglang-mem-fraction-static', '0.4', '--dist-timeout', '2000',
    ]);
    expect(() => renderPrepareArgv(launch({ extraArgs: ['--output-path=/elsewhere'] }))).toThrow(/sets --output-path/);

    const { result, launches } = await run();
    expect(launches).toBe(1);
    expect(result).toMatchObject({ samples: 12, ok: 12, dropped: [] });
    expect(result.totalTokens).toBeGreaterThan(12);
    for (const [idx, group] of [[0, 'rows_0-5'], [7, 'rows_5-10'], [11, 'rows_10-15']] as const) {
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
    expect(result).toMatchObject({ samples: 12, ok: 12, dropped: [] });
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
    expect((await verifyOffline(host, 'python3', join(dir, 'hidden'), HIDDEN)).bad.map((b) => b.path)).toEqual([victim]);
    // A new run of the stage (new launch ids): the sweep before the launch removes it.
    const again = await superviseJob<OfflineResult, unknown>(
      { host, prefix: 'r2.extract.', logPath: (g) => join(dir, `again-${g}.log`), cwd: dir, env: { AERIE_SIM_TIME_SCALE: '0' }, crashRetries: 0, pollMs: 50, heartbeat: () => undefined, what: 'x', crashType: 'x' },
      offlineHooks({ host, launch: launch(), hiddenSize: HIDDEN, python: 'python3', rowTokens: await estimateRows(host, data, 2048), redoLimit: 0 }),
    );
    expect(again.result.ok).toBe(12);
    expect((await stat(victim)).size).toBe(whole);
    expect(await readFile(join(dir, 'again-0.log'), 'utf8')).toMatch(/Saved 1 hidden-state files .* \(11 existed already\)/);
  });

  it('counts rows the script dropped (NaN states) instead of losing them silently', async () => {
    const { result } = await run({ AERIE_SIM_PREPARE_NAN_EVERY: '5' });
    expect(result).toMatchObject({ samples: 12, ok: 10, dropped: [4, 9] });
  });

  it('refuses to launch when the destination cannot hold the estimate, naming both figures', async () => {
    const small: Host = new Proxy(host, {
      get(target, prop, receiver) {
        if (prop === 'freeBytes') return async () => 1_000_000;
        const v = Reflect.get(target, prop, receiver) as unknown;
        return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v;
      },
    });
    const err = await run({}, { host: small }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(InsufficientSpaceError);
    const e = err as InsufficientSpaceError;
    expect(e.freeBytes).toBe(1_000_000);
    expect(e.neededBytes).toBeGreaterThan(1_000_000);
    expect(e.message).toContain(`${e.neededBytes} bytes`);
    expect(e.message).toContain('(1000000 bytes) are free');
    expect(await host.listLaunches()).toEqual([]);
  });
});
