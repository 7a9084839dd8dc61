/**
 * Real SpecForge HEAD (a6b6b023) on the lent H200 (test/fixtures/real/specforge-a6b6b023,
 * PROVENANCE.md there) as the judge of aerie's readers and of the simulator: the same
 * assertions run on what the real tool left and on what `aerie-sim specforge` leaves for the
 * same config and the same kill, so the simulator passes only where the real tool does.
 */
import { cp, mkdir, readFile, readdir, symlink, truncate, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { planRun } from '../../src/cli/plan.js';
import { loadConfigFile } from '../../src/config/load.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { trainSpec } from '../../src/stages/launch-specs.js';
import { runStopStep } from '../../src/stages/train/specforge-run.js';
import { verifyDrafter } from '../../src/stages/train/drafter.js';
import { useLocalHost } from '../support/local-host.js';
import { runSimCli } from '../support/sim.js';
import {
  parsePythonMetricDict,
  parseSpecforgeProgress,
  specforgeStopStep,
} from '../../src/stages/train/specforge-progress.js';
import {
  checkpointProblem,
  listSpecforgeCheckpoints,
  newestCompleteCheckpoint,
} from '../../src/stages/train/specforge-checkpoints.js';

const ROOT = resolve(import.meta.dirname, '../..');
const FIX = join(ROOT, 'test/fixtures/real/specforge-a6b6b023');
const fixture = (name: string) => readFile(join(FIX, name), 'utf8');
const REAL_ROOT = '/tmp/real/aerie/runs';

const fx = useLocalHost('aerie-head-', { sub: 'work' });
let tmp: string;
let host: LocalHost;

/**
 * A directory tree from `ls -la -R` output, under `root` instead of its original prefix:
 * files get their listed sizes (sparse), symlinks their listed text. What aerie's lister sees
 * is then exactly what it would have seen on the GPU host at that moment.
 */
async function materialize(listing: string, from: string, root: string): Promise<void> {
  let dir: string | undefined;
  for (const line of listing.split('\n')) {
    const header = /^(\/\S+):$/.exec(line);
    if (header) {
      dir = join(root, header[1]!.slice(from.length));
      await mkdir(dir, { recursive: true });
      continue;
    }
    const m = /^([-dl])\S+\s+\d+\s+\S+\s+\S+\s+(\d+)\s+(.+)$/.exec(line);
    if (!m || !dir) continue;
    const [, kind, size, rest] = m;
    if (rest === '.' || rest === '..') continue;
    if (kind === 'd') await mkdir(join(dir, rest!), { recursive: true });
    else if (kind === 'l') {
      const [name, target] = rest!.split(' -> ');
      await symlink(target!, join(dir, name!));
    } else {
      await writeFile(join(dir, rest!), '');
      await truncate(join(dir, rest!), Number(size));
    }
  }
}

/** The last `step N: {...}` dict of a log, as Python printed it. */
function lastDict(log: string): Record<string, number | number[]> {
  const lines = log.split('\n').filter((l) => /^step \d+: \{/.test(l));
  const last = lines.at(-1)!;
  return parsePythonMetricDict(last.slice(last.indexOf('{')));
}

interface HeadRun {
  cleanLog: string;
  killLog: string;
  resumeLog: string;
  /** Output dirs of the killed run (as left by the kill) and after its resume. */
  killedOut: string;
  resumedOut: string;
  runId: string;
}

/** What aerie needs to hold of a HEAD run; the same for the real tool and the simulator. */
function headAssertions(label: string, get: () => HeadRun) {
  describe(label, () => {
    it('progress: step, loss, acc, lr, grad_norm and acceptance rate from the last dict line; nothing read as a rewind', () => {
      const { cleanLog } = get();
      const p = parseSpecforgeProgress(cleanLog);
      const d = lastDict(cleanLog);
      expect(p.step).toBe(16);
      expect(p.loss).toBe(d.loss);
      expect(p.acc).toBe(d.acc);
      expect(p.lr).toBe(d.lr);
      expect(p.gradNorm).toBe(d.grad_norm);
      expect(p.acceptanceRate).toBe(d.acceptance_rate);
      expect(p.rewound).toBeUndefined();
    });

    it('a kill mid-save: the half-written checkpoint never counts, -latest names the last complete one', async () => {
      const { killedOut, runId, killLog } = get();
      expect(parseSpecforgeProgress(killLog).step).toBeGreaterThanOrEqual(8);
      const l = await listSpecforgeCheckpoints(host, killedOut, runId);
      const step8 = l.checkpoints.find((c) => c.step === 8);
      expect(step8, 'the kill left a step-8 directory').toBeDefined();
      expect(checkpointProblem(step8!, 1)).toBeDefined();
      expect(newestCompleteCheckpoint(l, 1)?.step).toBe(4);
      expect(l.latest?.step).toBe(4);
    });

    it('the resume from that checkpoint: steps 5…16, the rewind of step 8 as a note, step 16 complete', async () => {
      const { resumeLog, resumedOut, runId } = get();
      const steps = [...resumeLog.matchAll(/^step (\d+): \{/gm)].map((m) => Number(m[1]));
      expect(steps[0]).toBe(5);
      expect(steps.at(-1)).toBe(16);
      const p = parseSpecforgeProgress(resumeLog);
      expect(p.step).toBe(16);
      expect(p.rewound).toMatch(/rewinding checkpoint timeline at step 8/);
      const l = await listSpecforgeCheckpoints(host, resumedOut, runId);
      expect(newestCompleteCheckpoint(l, 1)?.step).toBe(16);
      expect(l.latest?.step).toBe(16);
    });
  });
}

// ---- the real tool ---------------------------------------------------------------------

const real: Partial<HeadRun> = {};
// ---- the simulator, same config and same kill -------------------------------------------
const sim: Partial<HeadRun> = {};

beforeAll(async () => {
  ({ dir: tmp, host } = fx);

  real.cleanLog = await fixture('clean.log');
  real.killLog = await fixture('kill.log');
  real.resumeLog = await fixture('resume.log');
  real.runId = 'tiny';
  await materialize(await fixture('ls-after-kill.txt'), REAL_ROOT, join(tmp, 'real-kill'));
  await materialize(await fixture('ls-after-resume.txt'), REAL_ROOT, join(tmp, 'real-resume'));
  real.killedOut = join(tmp, 'real-kill/r2/train/output');
  real.resumedOut = join(tmp, 'real-resume/r2/train/output');

  // The simulator gets the config that ran, with its paths moved into the temp dir.
  const cfg = parseYaml(await fixture('specforge.yaml')) as Record<string, Record<string, unknown>>;
  const features = join(tmp, 'sim/features');
  await mkdir(join(features, 'rows_0-2000'), { recursive: true });
  for (let i = 0; i < 24; i++) await writeFile(join(features, 'rows_0-2000', `data_${i}.ckpt`), 'x');
  cfg.model!.target_model_path = join(ROOT, 'examples/models/sim-llama-8b');
  cfg.model!.draft_model_config = join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json');
  delete cfg.model!.vocab_mapping_path;
  cfg.data!.hidden_states_path = features;
  const cfgPath = join(tmp, 'sim/specforge.yaml');
  await writeFile(cfgPath, JSON.stringify(cfg));
  const run = (out: string, env: Record<string, string>, ...overrides: string[]) => {
    const r = runSimCli(['specforge', 'train', '-c', cfgPath, `output_dir=${out}`, ...overrides], {
      AERIE_SIM_TIME_SCALE: '0',
      ...env,
    });
    return { rc: r.status, log: r.stdout + r.stderr };
  };
  const clean = run(join(tmp, 'sim/clean'), {});
  expect(clean.rc).toBe(0);
  sim.cleanLog = clean.log;
  sim.runId = 'tiny';
  sim.killedOut = sim.resumedOut = join(tmp, 'sim/killed');
  const kill = run(sim.killedOut, { AERIE_SIM_SPECFORGE_CRASH_IN_SAVE: '8' });
  expect(kill.rc).not.toBe(0);
  sim.killLog = kill.log;
  // the killed run's listing is checked before the resume writes into the same directory
  await mkdir(join(tmp, 'sim/killed-snapshot'));
  await cp(sim.killedOut, join(tmp, 'sim/killed-snapshot'), {
    recursive: true,
    verbatimSymlinks: true,
    preserveTimestamps: true,
  });
  sim.killedOut = join(tmp, 'sim/killed-snapshot');
  const resume = run(sim.resumedOut, {}, `training.resume_from=${join(sim.resumedOut, 'tiny-step4')}`);
  expect(resume.rc).toBe(0);
  sim.resumeLog = resume.log;
}, 120_000);

headAssertions('real SpecForge a6b6b023 on the H200', () => real as HeadRun);
headAssertions('aerie-sim specforge with the same config and kill', () => sim as HeadRun);

describe('aerie and the real HEAD run agree', () => {
  it('aerie plan renders the specforge.yaml that ran (run id r1)', async () => {
    const config = await loadConfigFile(join(FIX, 'aerie.yaml'), process.env);
    const step = planRun(config, 'r1').find((s) => s.stage === 'train' && s.files);
    const [path, content] = Object.entries(step!.files!)[0]!;
    expect(path).toBe('/tmp/real/aerie/runs/r1/train/specforge.yaml');
    expect(content).toBe(await fixture('specforge.yaml'));
  });

  it("the run's stop step is what aerie computes from the config (24 feature files, max_steps 16)", async () => {
    const config = await loadConfigFile(join(FIX, 'aerie.yaml'), process.env);
    const spec = trainSpec(
      config,
      { root: '/r', logs: '/r/logs', hidden: '/r/hidden_states', train: '/r/train' },
      '/r/data/train.jsonl',
      { dir: '/r/hidden_states', layout: 'specforge' },
    );
    if (spec.driver !== 'specforge') throw new Error('the fixture config trains with the specforge driver');
    expect(runStopStep(spec.run, 24)).toBe(
      Math.max(...[...real.cleanLog!.matchAll(/^step (\d+): \{/gm)].map((m) => Number(m[1]))),
    );
    expect(
      specforgeStopStep({ samples: 24, worldSize: 1, batchSize: 1, accumulationSteps: 1, numEpochs: 1, maxSteps: 16 }),
    ).toBe(16);
    expect(specforgeStopStep({ samples: 24, worldSize: 1, batchSize: 1, accumulationSteps: 1, numEpochs: 1 })).toBe(24);
  });

  it('the exported drafter is one aerie accepts', async () => {
    const config = JSON.parse(await fixture('export-config.json')) as unknown;
    // The capture kept names, dtypes and shapes (plus header_bytes, the length prefix's value),
    // not data_offsets: lay the tensors out back to back, as any valid file could.
    const {
      header_bytes: _len,
      __metadata__,
      ...tensors
    } = JSON.parse(await fixture('export-safetensors-header.json')) as Record<
      string,
      { dtype: string; shape: number[] }
    >;
    const width: Record<string, number> = { BF16: 2, F16: 2, F32: 4, I64: 8, BOOL: 1 };
    let at = 0;
    const header: Record<string, unknown> = { __metadata__ };
    for (const [name, t] of Object.entries(tensors)) {
      const bytes = t.shape.reduce((a, b) => a * b, 1) * width[t.dtype]!;
      header[name] = { ...t, data_offsets: [at, at + bytes] };
      at += bytes;
    }
    expect(verifyDrafter(config, header)).toEqual([]);
    expect(Object.keys(tensors)).toEqual(
      expect.arrayContaining(['fc.weight', 'lm_head.weight', 'd2t', 't2d', 'norm.weight']),
    );
  });

  it("the simulator prints the real dict's keys, in the real order", () => {
    const keys = (log: string) => Object.keys(lastDict(log));
    expect(keys(sim.cleanLog!)).toEqual(keys(real.cleanLog!));
  });

  it('the simulated kill leaves what the real kill left in the step-8 directory', async () => {
    const names = async (d: string) => (await readdir(d)).sort();
    expect(await names(join(sim.killedOut!, 'tiny-step8'))).toEqual(await names(join(real.killedOut!, 'tiny-step8')));
  });
});
