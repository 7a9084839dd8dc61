/**
 * The three trainer drivers end to end against the simulated SpecForge (real detached
 * processes through LocalHost): a crash mid-run is relaunched from the newest checkpoint aerie
 * found itself, the result is verified before it counts, and an OOM is not retried.
 */
import { TRAIN_HYPER } from '../support/train-hyper.js';
import { mkdir, readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { JobFailure, superviseJob, type JobHooks } from '../../src/stages/common/job-supervise.js';
import { SPECFORGE_PROFILES } from '../../src/stages/common/specforge-revision.js';
import { commandHooks, v02Hooks, type TrainResult } from '../../src/stages/train/run.js';
import { specforgeHooks } from '../../src/stages/train/specforge-run.js';
import type { SpecforgeRun } from '../../src/stages/train/specforge-config.js';
import type { TrainLaunch } from '../../src/stages/train/launch.js';
import { useLocalHost } from '../support/local-host.js';

const ROOT = resolve(import.meta.dirname, '../..');
const SIM = join(ROOT, 'bin/aerie-sim.mjs');
const TARGET = join(ROOT, 'examples/models/sim-llama-8b');
const DRAFT = join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json');

const fx = useLocalHost('aerie-train-', { each: true, sub: 'host' });
let dir: string;
let host: LocalHost;
let data: string;
/** SpecForge's offline layout (the CLI trains offline only): 8 feature files the simulator counts. */
let features: string;

beforeEach(async () => {
  ({ dir, host } = fx);
  data = join(dir, 'train.jsonl');
  const rows = (await readFile(join(ROOT, 'examples/data/prompts.jsonl'), 'utf8'))
    .split('\n')
    .filter(Boolean)
    .slice(0, 8);
  await writeFile(data, rows.join('\n') + '\n');
  features = join(dir, 'hidden_states');
  await mkdir(join(features, 'rows_0-2000'), { recursive: true });
  for (let i = 0; i < 8; i++) await writeFile(join(features, 'rows_0-2000', `data_${i}.ckpt`), 'x');
});

const supervise = (hooks: JobHooks<TrainResult, unknown>, env: Record<string, string>) =>
  superviseJob<TrainResult, unknown>(
    {
      host,
      prefix: 'r1.train.',
      logPath: (gen) => join(dir, `train-${gen}.log`),
      cwd: dir,
      env: { AERIE_SIM_TIME_SCALE: '0', ...env },
      crashRetries: 2,
      pollMs: 50,
      heartbeat: () => undefined,
      what: 'trainer',
      crashType: 'TrainerCrashed',
    },
    hooks,
  );

/** A v0.2 launch of the simulated trainer in this test's dir (every v0.2 test starts from it). */
const v02 = (over: Partial<TrainLaunch> = {}): TrainLaunch => ({
  launcher: [process.execPath, SIM, 'train'],
  targetModelPath: TARGET,
  draftModelConfig: DRAFT,
  trainDataPath: data,
  outputDir: join(dir, 'out'),
  ...TRAIN_HYPER,
  tpSize: 1,
  saveInterval: 4,
  extraArgs: [],
  ...over,
});

const argvOf = async (launchId: string) => (await host.findLaunch(launchId))!.argv;
const drafterConfig = async (d: string) =>
  JSON.parse(await readFile(join(d, 'config.json'), 'utf8')) as Record<string, any>;

describe('trainer drivers on the simulator', () => {
  it('specforge: a crash resumes from the newest <run>-step<N> via training.resume_from, then export, then verify', async () => {
    const run: SpecforgeRun = {
      launcher: [process.execPath, SIM, 'specforge'],
      configPath: join(dir, 'specforge.yaml'),
      runId: 'r1',
      outputDir: join(dir, 'output'),
      targetModelPath: TARGET,
      draftModelConfig: DRAFT,
      targetBackend: 'sglang',
      trainDataPath: data,
      hiddenStatesPath: features,
      ...TRAIN_HYPER,
      saveInterval: 4,
      overrides: { 'training.log_interval': 2 },
    };
    const drafter = join(dir, 'drafter');
    const hooks = specforgeHooks(host, run, drafter, {
      host,
      prefix: 'r1.train-export.',
      logPath: (g: number) => join(dir, `export-${g}.log`),
      cwd: dir,
      env: {},
      crashRetries: 1,
      pollMs: 50,
      heartbeat: () => undefined,
    });
    const { result, launches } = await supervise(hooks, {
      AERIE_SIM_TRAIN_CRASH_AT_STEP: '6',
      AERIE_SIM_FAULT_ONCE: join(dir, 'once'),
    });
    expect(launches).toBe(2);
    expect(await argvOf('r1.train.0')).toEqual([process.execPath, SIM, 'specforge', 'train', '-c', run.configPath]);
    expect(await argvOf('r1.train.1')).toEqual([
      process.execPath,
      SIM,
      'specforge',
      'train',
      '-c',
      run.configPath,
      `training.resume_from=${join(dir, 'output', 'r1-step4')}`,
    ]);
    // HEAD prints no resume line: the relaunch's first dict line is the step after the checkpoint
    expect(await readFile(join(dir, 'train-1.log'), 'utf8')).toMatch(/^step 6: \{/m);
    expect((await argvOf('r1.train-export.0')).slice(2)).toEqual([
      'specforge',
      'export',
      '--to',
      'sglang',
      '--checkpoint',
      join(dir, 'output', 'r1-step16'),
      '--draft-config',
      DRAFT,
      '--output-dir',
      drafter,
    ]);
    expect(result.drafterDir).toBe(drafter);
    const cfg = await drafterConfig(drafter);
    expect(cfg.architectures).toEqual(['LlamaForCausalLMEagle3']);
    // The continued run ends where an uninterrupted one would: 8 samples × 2 epochs.
    expect(cfg.aerie_sim.trained_sample_epochs).toBe(16);
  });

  it('command: a template with resume-args continues from the pattern-matched checkpoint and the drafter is verified', async () => {
    await writeFile(
      join(dir, 'cfg.yaml'),
      [
        'run_id: c',
        `output_dir: ${join(dir, 'output')}`,
        'model:',
        `  target_model_path: ${TARGET}`,
        `  draft_model_config: ${DRAFT}`,
        'data:',
        `  hidden_states_path: ${features}`,
        'training:',
        '  num_epochs: 1',
        '  save_interval: 3',
      ].join('\n'),
    );
    // sh -c '<script>' node sim [resume args...]: the resume args arrive as "$@" after the shift.
    const script =
      'n="$0"; s="$1"; shift; "$n" "$s" specforge train -c {run_dir}/cfg.yaml "$@" && ' +
      '"$n" "$s" specforge export --to sglang --checkpoint {output_dir}/c-latest --draft-config {draft_model_config} --output-dir {output_dir}/final';
    const hooks = commandHooks(
      host,
      {
        launcher: ['sh', '-c', script, process.execPath, SIM],
        resumeArgs: ['training.resume_from={checkpoint}'],
        drafterDir: '{output_dir}/final',
        checkpointPattern: '^c-step(\\d+)$',
      },
      {
        target_model: TARGET,
        draft_model_config: DRAFT,
        train_data: data,
        hidden_states: features,
        hidden_states_layout: 'specforge',
        output_dir: join(dir, 'output'),
        run_dir: dir,
      },
    );
    const { result, launches } = await supervise(hooks, {
      AERIE_SIM_TRAIN_CRASH_AT_STEP: '5',
      AERIE_SIM_FAULT_ONCE: join(dir, 'once'),
    });
    expect(launches).toBe(2);
    expect((await argvOf('r1.train.1')).at(-1)).toBe(`training.resume_from=${join(dir, 'output', 'c-step3')}`);
    expect(result.drafterDir).toBe(join(dir, 'output', 'final'));
    expect((await drafterConfig(result.drafterDir)).aerie_sim.trained_sample_epochs).toBe(8);
  });

  it('specforge-v0.2: continues through the epoch_0 link and --max-num-steps into resume_step_<N>, past the old teardown failure; an OOM is not relaunched', async () => {
    const original = v02();
    const { result, launches } = await supervise(v02Hooks(host, original, 'r1.train.'), {
      AERIE_SIM_TRAIN_CRASH_AT_STEP: '7',
      AERIE_SIM_FAULT_ONCE: join(dir, 'once'),
    });
    expect(launches).toBe(2);
    const second = await argvOf('r1.train.1');
    // v0.2.0's --ckpt-dir dies (73e6f808:338,402): the checkpoint is loaded through --resume's own epoch_N lookup.
    expect(second).not.toContain('--ckpt-dir');
    expect(second.slice(second.indexOf('--resume'), second.indexOf('--resume') + 3)).toEqual([
      '--resume',
      '--max-num-steps',
      '12',
    ]);
    expect(second.at(-1)).toBe(join(dir, 'out', 'resume_step_4'));
    expect(await readlink(join(dir, 'out', 'resume_step_4', 'epoch_0'))).toBe(join(dir, 'out', 'epoch_0_step_4'));
    expect(result.drafterDir).toBe(join(dir, 'out', 'resume_step_4', 'epoch_1_step_12'));

    const oom = await superviseJob(
      {
        host,
        prefix: 'r2.train.',
        logPath: (g) => join(dir, `oom-${g}.log`),
        cwd: dir,
        env: { AERIE_SIM_TIME_SCALE: '0', AERIE_SIM_FAULT: 'train-oom' },
        crashRetries: 3,
        pollMs: 50,
        heartbeat: () => undefined,
        what: 'trainer',
        crashType: 'TrainerCrashed',
      },
      v02Hooks(host, { ...original, outputDir: join(dir, 'oom-out') }, 'r2.train.'),
    ).then(
      () => null,
      (e: unknown) => e,
    );
    expect(oom).toBeInstanceOf(JobFailure);
    expect((oom as JobFailure).type).toBe('OutOfMemoryError');
    expect((oom as JobFailure).message).toMatch(/expandable_segments/);
    expect((await host.listLaunches()).filter((r) => r.launchId.startsWith('r2.'))).toHaveLength(1);
  });
});

describe('specforge-v0.2 driver by SpecForge revision (simulator at the same revision)', () => {
  it("v0.2-resume: a crash relaunches with the script's own --resume into the same output dir, no --ckpt-dir", async () => {
    const original = v02({ profile: SPECFORGE_PROFILES['v0.2-resume'] });
    const { result, launches } = await supervise(v02Hooks(host, original, 'r1.train.'), {
      AERIE_SIM_SPECFORGE_REVISION: 'v0.2-resume',
      AERIE_SIM_TRAIN_CRASH_AT_STEP: '7',
      AERIE_SIM_FAULT_ONCE: join(dir, 'once'),
    });
    expect(launches).toBe(2);
    const second = await argvOf('r1.train.1');
    expect(second).toContain('--resume');
    expect(second).not.toContain('--ckpt-dir');
    expect(second.slice(second.indexOf('--output-dir'), second.indexOf('--output-dir') + 2)).toEqual([
      '--output-dir',
      join(dir, 'out'),
    ]);
    expect(result.drafterDir).toBe(join(dir, 'out', 'epoch_1_step_16'));
    expect((await drafterConfig(result.drafterDir)).aerie_sim.trained_steps).toBe(16);
  });

  it('v0.2-resume: a checkpoint cut short by a crash mid-save is moved aside so --resume takes the one before it', async () => {
    const original = v02({ profile: SPECFORGE_PROFILES['v0.2-resume'] });
    const { result, launches } = await supervise(v02Hooks(host, original, 'r1.train.'), {
      AERIE_SIM_SPECFORGE_REVISION: 'v0.2-resume',
      AERIE_SIM_TRAIN_CRASH_IN_SAVE: '8',
      AERIE_SIM_FAULT_ONCE: join(dir, 'once'),
    });
    expect(launches).toBe(2);
    const entries = await readdir(join(dir, 'out'));
    expect(entries.filter((e) => e.startsWith('epoch_0_step_8.incomplete-'))).toHaveLength(1);
    expect((await readFile(join(dir, 'train-1.log'), 'utf8')).match(/Last checkpoint detected: (\S+)/)?.[1]).toBe(
      join(dir, 'out', 'epoch_0_step_4'),
    );
    expect(result.drafterDir).toBe(join(dir, 'out', 'epoch_1_step_16'));
  });

  it('v0.2.0: a clean exit whose steps are not a multiple of save-interval keeps the newest checkpoint and says what it lacks', async () => {
    const original = v02({ saveInterval: 5 });
    const { result, launches } = await supervise(v02Hooks(host, original, 'r1.train.'), {});
    expect(launches).toBe(1);
    expect(result.drafterDir).toBe(join(dir, 'out', 'epoch_1_step_15'));
    expect(result.note).toMatch(/the last 1 of 16 steps were trained but not saved.*divisor of 16 \(e\.g\. 4\)/);
  });

  it('v0.2-final-save: the final save covers the steps, one launch; the teardown failure after it is only noted', async () => {
    const original = v02({ saveInterval: 5, profile: SPECFORGE_PROFILES['v0.2-final-save'] });
    const { result, launches } = await supervise(v02Hooks(host, original, 'r1.train.'), {
      AERIE_SIM_SPECFORGE_REVISION: 'v0.2-final-save',
    });
    expect([launches, result.drafterDir]).toEqual([1, join(dir, 'out', 'epoch_1_step_16')]);
    expect(result.note).toMatch(/^The trainer finished and then failed tearing down torch\.distributed/); // the old teardown, not a lack of steps
  });
});
