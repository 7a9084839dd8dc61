/**
 * aerie's lister, resume planner, progress parser and failure classification on what REAL
 * SpecForge (PyPI 0.2.0, a6b6b023's CLI) left at world size 2 on the CPU
 * (test/fixtures/real/specforge-a6b6b023-cpu-ws2/, PROVENANCE.md there), and the simulator
 * against the same runs. Directory listings are rebuilt as real trees (sparse files of the
 * recorded sizes, the recorded symlink) and read through LocalHost.
 */
import { mkdir, readdir, readFile, symlink, truncate, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { parseSpecforgeProgress, type CliTrainProgress } from '../../src/stages/train/specforge-progress.js';
import { classifySpecforgeFailure, runStopStep } from '../../src/stages/train/specforge-run.js';
import { listSpecforgeCheckpoints, planSpecforgeResume } from '../../src/stages/train/specforge-checkpoints.js';
import type { SpecforgeRun } from '../../src/stages/train/specforge-config.js';
import { useLocalHost } from '../support/local-host.js';
import { runSimCli } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const FIX = join(ROOT, 'test/fixtures/real/specforge-a6b6b023-cpu-ws2');
const fixture = (name: string): Promise<string> => readFile(join(FIX, name), 'utf8');
const fx = useLocalHost('aerie-ranks-real-', { sub: 'work' });
let dir: string;
let host: LocalHost;

beforeAll(async () => {
  ({ dir, host } = fx);
});

/** A recorded `find -printf '%y %s %p %l'` listing as a tree under a fresh directory. */
let trees = 0;
async function rebuild(listing: string): Promise<string> {
  const root = join(dir, `tree-${++trees}`);
  await mkdir(root);
  for (const line of (await fixture(listing)).split('\n').filter(Boolean)) {
    const [kind, size, rel, target] = line.split(' ');
    const p = join(root, rel!);
    if (kind === 'd') await mkdir(p, { recursive: true });
    else if (kind === 'l') await symlink(target!, p);
    else {
      await writeFile(p, '');
      await truncate(p, Number(size));
    }
  }
  return root;
}

const run = (world: number): SpecforgeRun => ({
  launcher: ['specforge'],
  configPath: '/c.yaml',
  runId: 'tiny',
  outputDir: '/o',
  targetModelPath: '/t',
  draftModelConfig: '/d.json',
  targetBackend: 'sglang',
  trainDataPath: '/x.jsonl',
  hiddenStatesPath: '/h',
  chatTemplate: 'llama3',
  maxLength: 256,
  numEpochs: 1,
  batchSize: 1,
  learningRate: 1e-4,
  tttLength: 3,
  saveInterval: 4,
  overrides: { 'deployment.trainer.nproc_per_node': world },
});
const dictSteps = (log: string): number[] => [...log.matchAll(/step (\d+): \{/g)].map((m) => Number(m[1]));

describe('real SpecForge at world size 2 (CPU, gloo)', () => {
  it('clean: 17 files give each rank 9 (padded to 18), so 9 steps, each printed by both ranks; every save holds both rank files', async () => {
    const log = await fixture('clean.log');
    expect(runStopStep(run(2), 17)).toBe(9);
    expect(dictSteps(log)).toEqual([1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9]);
    const p = parseSpecforgeProgress(log);
    expect(p.step).toBe(9);
    expect(p.loss).toBeGreaterThan(0);
    const out = await rebuild('ls-after-clean.txt');
    const l = await listSpecforgeCheckpoints(host, out, 'tiny');
    // max_checkpoints 2 rotated step 4 away; DDP keeps the optimizer in the shared file, the rank files hold RNG only.
    expect(l.checkpoints.map((c) => [c.step, c.files])).toEqual(
      [9, 8].map((s) => [
        s,
        { 'training_state.pt': 20227892, 'training_state_rank0.pt': 6937, 'training_state_rank1.pt': 6937 },
      ]),
    );
    expect(l.latest?.step).toBe(9);
    expect(planSpecforgeResume(l, 2)).toMatchObject({ kind: 'resume', checkpoint: { step: 9 } });
  });

  it('killed in step 8’s save: both rank files landed, the shared state did not; aerie resumes step 4, as the run did, and refuses world size 1', async () => {
    const out = await rebuild('ls-after-kill.txt');
    const l = await listSpecforgeCheckpoints(host, out, 'tiny');
    expect(l.checkpoints.find((c) => c.step === 8)!.files).toEqual({
      'training_state.pt.tmp': 0,
      'training_state_rank0.pt': 6937,
      'training_state_rank1.pt': 6937,
    });
    const plan = planSpecforgeResume(l, 2);
    expect(plan.kind === 'resume' && plan.checkpoint.dir).toBe(join(out, 'tiny-step4'));
    expect((await fixture('resume-from.txt')).trim().endsWith('/tiny-step4')).toBe(true);
    expect(plan.kind === 'resume' && plan.skipped).toEqual([
      `${join(out, 'tiny-step8')} lacks training_state.pt (a save cut short)`,
    ]);
    expect(planSpecforgeResume(l, 1)).toMatchObject({ kind: 'world-mismatch', writtenAt: 2, worldSize: 1 });
    // A SIGKILL leaves no traceback: a plain crash, worth the relaunch.
    expect(classifySpecforgeFailure(await fixture('kill.log'))).toMatchObject({ kind: 'crash', retryable: true });
  });

  it('resume at world size 2: steps 5…9 from both ranks, the stale step 8 rewound by rank 0 alone, two ranks’ prints run together', async () => {
    const log = await fixture('resume.log');
    expect(dictSteps(log)).toEqual([5, 5, 6, 6, 7, 7, 8, 8, 9, 9]);
    expect(log.match(/rewinding checkpoint timeline at step 8: deleting \S+\/tiny-step8$/gm)).toHaveLength(1);
    // PYTHONUNBUFFERED=1: print's text and newline are two writes, and the ranks raced.
    expect(log).toMatch(/\}step 7: \{[^\n]*\}\n\n/);
    let p: CliTrainProgress | undefined;
    for (let i = 0; i < log.length; i += 211) p = parseSpecforgeProgress(log.slice(i, i + 211), p);
    expect(p!.step).toBe(9);
    expect(p!.rewound).toMatch(/^rewinding checkpoint timeline at step 8/);
    const l = await listSpecforgeCheckpoints(host, await rebuild('ls-after-resume.txt'), 'tiny');
    expect(l.checkpoints.map((c) => c.step)).toEqual([9, 8]);
    expect(planSpecforgeResume(l, 2)).toMatchObject({ kind: 'resume', checkpoint: { step: 9 } });
  });

  it('resume at world size 1 of the two-rank checkpoint: refused on rank 0, and aerie will not relaunch it', async () => {
    const log = await fixture('shrink.log');
    expect(await fixture('shrink.rc')).toMatch(/^rc=1 /);
    const f = classifySpecforgeFailure(log);
    expect(f).toMatchObject({ kind: 'usage', retryable: false });
    expect(f.advice).toMatch(/written at world_size=2 with world_size=1/);
  });
});

describe('real SpecForge: a one-rank checkpoint resumed at two ranks', () => {
  it('both ranks refuse, torchrun reports both; aerie’s planner refuses it before launching and the classifier after', async () => {
    const log = await fixture('grow-resume.log');
    for (const rank of [0, 1])
      expect(log).toMatch(
        new RegExp(
          `^\\[rank${rank}\\]: ValueError: checkpoint \\S+tiny-step4 has no usable per-rank state for rank ${rank} at world_size=2 \\(written at world_size=1\\)`,
          'm',
        ),
      );
    expect(log).toMatch(/^specforge\.cli FAILED$/m);
    const f = classifySpecforgeFailure(log);
    expect(f).toMatchObject({ kind: 'usage', retryable: false });
    expect(f.advice).toMatch(/written at world_size=1 with world_size=2/);
    const l = await listSpecforgeCheckpoints(host, await rebuild('ls-after-grow.txt'), 'tiny');
    expect(planSpecforgeResume(l, 2)).toMatchObject({ kind: 'world-mismatch', writtenAt: 1, worldSize: 2 });
  });
});

describe('the simulator against the real two-rank runs', () => {
  const cfg = async (): Promise<string> => {
    const features = join(dir, 'features', 'rows_0-2000');
    await mkdir(features, { recursive: true });
    for (let i = 0; i < 17; i++) await writeFile(join(features, `data_${i}.ckpt`), 'x');
    const p = join(dir, 'sim.yaml');
    await writeFile(
      p,
      [
        'run_id: tiny',
        'model:',
        `  target_model_path: ${join(ROOT, 'examples/models/sim-llama-8b')}`,
        `  draft_model_config: ${join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json')}`,
        'data:',
        `  hidden_states_path: ${join(dir, 'features')}`,
        'training:',
        '  num_epochs: 1',
        '  batch_size: 1',
        '  save_interval: 4',
        '  max_checkpoints: 2',
        '  log_interval: 1',
        'deployment:',
        '  trainer:',
        '    nproc_per_node: 2',
      ].join('\n'),
    );
    return p;
  };
  const sim = (env: Record<string, string>, ...args: string[]) =>
    runSimCli(['specforge', 'train', ...args], { AERIE_SIM_TIME_SCALE: '0', ...env });
  const names = async (out: string) => {
    const l = await listSpecforgeCheckpoints(host, out, 'tiny');
    return { steps: l.checkpoints.map((c) => [c.step, Object.keys(c.files).sort()]), latest: l.latest?.target };
  };

  it('writes what the real runs wrote: the same steps, file names, -latest, and a kill at step 8 that leaves the same files', async () => {
    const c = await cfg();
    const clean = sim({}, '-c', c, `output_dir=${join(dir, 'sim-clean')}`);
    expect(clean.status).toBe(0);
    expect(dictSteps(clean.stdout)).toEqual(dictSteps(await fixture('clean.log')));
    expect(await names(join(dir, 'sim-clean'))).toEqual(await names(await rebuild('ls-after-clean.txt')));
    const killed = join(dir, 'sim-kill');
    expect(sim({ AERIE_SIM_SPECFORGE_CRASH_IN_SAVE: '8:peers-written' }, '-c', c, `output_dir=${killed}`).status).toBe(
      137,
    );
    expect(await names(killed)).toEqual(await names(await rebuild('ls-after-kill.txt')));
    const resumed = sim({}, '-c', c, `output_dir=${killed}`, `training.resume_from=${join(killed, 'tiny-step4')}`);
    expect(dictSteps(resumed.stdout)).toEqual(dictSteps(await fixture('resume.log')));
    expect(resumed.stderr).toContain(
      `rewinding checkpoint timeline at step 8: deleting ${join(killed, 'tiny-step8')}\n`,
    );
    expect(await names(killed)).toEqual(await names(await rebuild('ls-after-resume.txt')));
    expect((await readdir(killed)).sort()).toEqual(['tiny-latest', 'tiny-step8', 'tiny-step9']);
  });

  it('refuses world size 1 with the real refusal’s words and frames (HEAD line numbers; PyPI’s cli.py sits 5 lines lower)', async () => {
    const c = await cfg();
    const out = join(dir, 'sim-shrink');
    expect(sim({}, '-c', c, `output_dir=${out}`).status).toBe(0);
    const r = sim(
      {},
      '-c',
      c,
      `output_dir=${out}`,
      `training.resume_from=${join(out, 'tiny-step8')}`,
      'deployment.trainer.nproc_per_node=1',
    );
    expect(r.status).toBe(1);
    // PyPI's cli.py has 5 more lines at 259 (worker_env's None values unset the variable).
    const frames = (t: string, pypi = false) =>
      [...t.matchAll(/^\[rank0\]:\s+File "([^"]+)", line (\d+), in (\S+)$/gm)].map(
        ([, f, l, fn]) =>
          `${f!.replace(/^.*\/(specforge\/)/, '$1')}:${pypi && f!.endsWith('specforge/cli.py') && Number(l) > 259 ? Number(l) - 5 : l}:${fn}`,
      );
    const real = await fixture('shrink.log');
    expect(frames(r.stderr)).toEqual(frames(real, true));
    const refusal = (t: string) =>
      /^\[rank0\]: (ValueError: checkpoint )\S+( has no usable per-rank state .*)$/m.exec(t)!.slice(1).join('<dir>');
    expect(refusal(r.stderr)).toBe(refusal(real));
    expect(r.stderr).not.toContain('ChildFailedError');
  });

  it('refuses a one-rank checkpoint at two ranks as the real run did: both ranks, then torchrun’s report with its frames', async () => {
    const c = await cfg();
    const out = join(dir, 'sim-grow');
    expect(
      sim({}, '-c', c, `output_dir=${out}`, 'deployment.trainer.nproc_per_node=1', 'training.max_steps=4').status,
    ).toBe(0);
    const r = sim({}, '-c', c, `output_dir=${out}`, `training.resume_from=${join(out, 'tiny-step4')}`);
    expect(r.status).toBe(1);
    const real = await fixture('grow-resume.log');
    const refusals = (t: string) =>
      [...t.matchAll(/^\[rank(\d)\]: ValueError: checkpoint \S+( has no usable .*)$/gm)]
        .map((m) => `${m[1]}${m[2]}`)
        .sort();
    expect(refusals(r.stderr)).toEqual(refusals(real));
    // torchrun's own traceback and report, down to the failure entries (whose order follows timing).
    const report = (t: string) => {
      const from = t.indexOf('Traceback (most recent call last):\n  File "<frozen runpy>"');
      return t.slice(from, t.indexOf('Failures:', from)).replace(/File "[^"]*\/torch\//g, 'File "torch/');
    };
    expect(report(r.stderr)).toBe(report(real));
    expect(r.stderr).toMatch(
      /^W\d{4} [\d:.]+ \d+ \S+\/elastic\/multiprocessing\/api\.py:1028\] Sending process \d+ closing signal SIGTERM$/m,
    );
    expect(real).toMatch(
      /^W\d{4} [\d:.]+ \d+ \S+\/elastic\/multiprocessing\/api\.py:1028\] Sending process \d+ closing signal SIGTERM$/m,
    );
  });
});
