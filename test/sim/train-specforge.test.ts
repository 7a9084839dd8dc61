/**
 * The simulated current SpecForge CLI (HEAD a6b6b023) against what HEAD does: the `step N: {...}`
 * dict lines and nothing else on a pipe, HEAD's checkpoint layout (per-rank files, -latest,
 * rotation, rewind), resume under HEAD's contract, and export. Every run goes through aerie's
 * own readers (parseSpecforgeProgress, listSpecforgeCheckpoints, verifyDrafter).
 */
import { mkdir, readFile, readdir, readlink, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { pyFloatRepr } from '../../sim/specforge/metrics.js';
import { runSpecforgeTrain } from '../../sim/specforge/train.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { verifyDrafter, parseSafetensorsHeader } from '../../src/stages/train/drafter.js';
import { parseSpecforgeProgress } from '../../src/stages/train/specforge-progress.js';
import { listSpecforgeCheckpoints, newestCompleteCheckpoint } from '../../src/stages/train/specforge-checkpoints.js';
import { useLocalHost } from '../support/local-host.js';
import { runSimCli } from '../support/sim.js';

const ROOT = resolve(import.meta.dirname, '../..');
const DRAFT = join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json');
const fx = useLocalHost('aerie-sf-', { sub: 'work' });
let dir: string;
let host: LocalHost;
const sim = (env: Record<string, string>, ...args: string[]) => runSimCli(args, { AERIE_SIM_TIME_SCALE: '0', ...env });
const train = (out: string, ...overrides: string[]) =>
  sim({}, 'specforge', 'train', '-c', join(dir, 'cfg.yaml'), `output_dir=${out}`, ...overrides);

beforeAll(async () => {
  ({ dir, host } = fx);
  await mkdir(join(dir, 'features'));
  for (let i = 0; i < 8; i++) await writeFile(join(dir, 'features', `data_${i}.ckpt`), 'x');
  await writeFile(
    join(dir, 'cfg.yaml'),
    [
      'run_id: t',
      'model:',
      `  target_model_path: ${join(ROOT, 'examples/models/sim-llama-8b')}`,
      `  draft_model_config: ${DRAFT}`,
      'data:',
      `  hidden_states_path: ${join(dir, 'features')}`,
      'training:',
      '  num_epochs: 1',
      '  save_interval: 2',
      '  log_interval: 2',
    ].join('\n'),
  );
});

describe('aerie-sim specforge train (HEAD a6b6b023)', () => {
  it("prints only HEAD's dict lines at log_interval on a pipe, and leaves HEAD's checkpoint layout", async () => {
    const out = join(dir, 'a');
    const r = train(out);
    expect(r.status).toBe(0);
    expect(r.stderr).toBe(''); // no tqdm without a TTY (controller.py:574)
    const lines = r.stdout.split('\n').filter(Boolean);
    expect(lines.map((l) => l.slice(0, l.indexOf(':')))).toEqual(['step 2', 'step 4', 'step 6', 'step 8']);
    expect(lines[0]).toMatch(
      /^step 2: \{'acc_0': [\d.]+, .*'acc': [\d.]+, 'loss': [\d.]+, .*'acceptance_rate': [\d.]+, 'grad_norm': [\d.]+, 'lr': [\de.+-]+, 'perf\/optimizer_steps_per_hour': /,
    );
    const p = parseSpecforgeProgress(r.stdout);
    expect(p.step).toBe(8);
    expect(p.loss).toBeGreaterThan(0);
    expect(p.acc).toBeGreaterThan(0);
    expect(p.lr).toBeGreaterThanOrEqual(0);
    expect(p.acceptanceRate).toBeGreaterThan(0);

    expect((await readdir(out)).sort()).toEqual(['t-latest', 't-step2', 't-step4', 't-step6', 't-step8']);
    expect(await readlink(join(out, 't-latest'))).toBe('t-step8');
    expect((await readdir(join(out, 't-step8'))).sort()).toEqual(['training_state.pt', 'training_state_rank0.pt']);
    const l = await listSpecforgeCheckpoints(host, out, 't');
    expect(newestCompleteCheckpoint(l, 1)?.step).toBe(8);
    expect(l.latest?.step).toBe(8);
  });

  it('rotates to max_checkpoints complete checkpoints', async () => {
    const out = join(dir, 'rot');
    expect(train(out, 'training.max_checkpoints=2').status).toBe(0);
    expect((await readdir(out)).sort()).toEqual(['t-latest', 't-step6', 't-step8']);
  });

  it('warns when a save rewinds later steps, and aerie reads that as a note, not a step', async () => {
    const out = join(dir, 'rw');
    expect(train(out).status).toBe(0);
    const r = train(out, 'training.save_interval=4');
    expect(r.status).toBe(0);
    expect(r.stderr).toBe(
      `rewinding checkpoint timeline at step 4: deleting ${join(out, 't-step4')}, ${join(out, 't-step6')}, ${join(out, 't-step8')}\n`,
    );
    const p = parseSpecforgeProgress(r.stdout + r.stderr);
    expect(p.step).toBe(8);
    expect(p.rewound).toMatch(/^rewinding checkpoint timeline at step 4/);
    // t-step2 is below the rewind point and stays.
    expect((await readdir(out)).sort()).toEqual(['t-latest', 't-step2', 't-step4', 't-step8']);
  });

  it('resumes under the same config from a dir, its -latest, or nothing left to do', async () => {
    const out = join(dir, 'rw');
    const done = train(out, 'training.save_interval=4', `training.resume_from=${out}`);
    expect(done.status).toBe(0);
    expect(done.stdout).toBe(''); // already at the end: no step, no save (trainer.py:473-477,528)
    const mid = train(out, 'training.save_interval=4', `training.resume_from=${join(out, 't-step4')}`);
    expect(mid.status).toBe(0);
    expect(
      mid.stdout
        .split('\n')
        .filter(Boolean)
        .map((l) => l.slice(0, l.indexOf(':'))),
    ).toEqual(['step 6', 'step 8']);
    expect(mid.stderr).toBe(`rewinding checkpoint timeline at step 8: deleting ${join(out, 't-step8')}\n`);
  });

  it("refuses a resume whose contract differs (num_epochs) or whose world size differs, in HEAD's words", () => {
    const out = join(dir, 'rw');
    const epochs = train(out, `training.resume_from=${join(out, 't-step4')}`, 'training.num_epochs=2');
    expect(epochs.status).toBe(1);
    expect(epochs.stderr).toContain(
      `checkpoint ${join(out, 't-step4')} was written with num_epochs=1 but this run has num_epochs=2; resume with the original configuration`,
    );
    const wider = train(out, `training.resume_from=${join(out, 't-step4')}`, 'deployment.trainer.nproc_per_node=2');
    expect(wider.status).toBe(1);
    expect(wider.stderr).toContain(
      `checkpoint ${join(out, 't-step4')} has no usable per-rank state for rank 0 at world_size=2 (written at world_size=1)`,
    );
  });

  it("leaves a save cut short between rank 0's files and rank 1's; aerie skips it at world 2", async () => {
    const out = join(dir, 'cut');
    const r = sim(
      { AERIE_SIM_SPECFORGE_CRASH_IN_SAVE: '4' },
      'specforge',
      'train',
      '-c',
      join(dir, 'cfg.yaml'),
      `output_dir=${out}`,
      'deployment.trainer.nproc_per_node=2',
    );
    expect(r.status).not.toBe(0);
    expect((await readdir(join(out, 't-step2'))).sort()).toEqual([
      'training_state.pt',
      'training_state_rank0.pt',
      'training_state_rank1.pt',
    ]);
    expect((await readdir(join(out, 't-step4'))).sort()).toEqual(['training_state.pt', 'training_state_rank0.pt']);
    const l = await listSpecforgeCheckpoints(host, out, 't');
    expect(newestCompleteCheckpoint(l, 2)?.step).toBe(2);
    expect(l.latest?.step).toBe(2);
    // Each rank prints its own dict line (controller.py:721 has no rank gate).
    expect(r.stdout.split('\n').filter((x) => x.startsWith('step 2:'))).toHaveLength(2);
  });

  it('shows the Training: meter only when stderr is a TTY, and train/ keys with a tracker', async () => {
    const run = async (errIsTTY: boolean, ...o: string[]) => {
      let out = '';
      let err = '';
      const code = await runSpecforgeTrain(
        join(dir, 'cfg.yaml'),
        [`output_dir=${join(dir, `tty-${errIsTTY}`)}`, ...o],
        {
          out: (t) => void (out += t),
          err: (t) => void (err += t),
          env: { AERIE_SIM_TIME_SCALE: '0' },
          errIsTTY,
        },
      );
      return { code, out, err };
    };
    const tty = await run(true);
    expect(tty.code).toBe(0);
    expect(tty.err).toMatch(/\rTraining: 100%\|██████████\| 8\/8 \[[^\]]*step\/s\]\n$/);
    expect(parseSpecforgeProgress(tty.err).totalSteps).toBe(8);
    expect((await run(false)).err).toBe('');
    const tracked = await run(false, 'tracking.report_to=tensorboard');
    expect(tracked.out).toContain("'train/loss': ");
    expect(parseSpecforgeProgress(tracked.out).loss).toBeGreaterThan(0);
  });

  it('writes floats as Python repr does', () => {
    expect([9.5e-5, 7200, 0.3333333333333333, 1e16, 0.0001].map(pyFloatRepr)).toEqual([
      '9.5e-05',
      '7200.0',
      '0.3333333333333333',
      '1e+16',
      '0.0001',
    ]);
  });
});

describe('aerie-sim specforge export', () => {
  it('exports the -latest checkpoint to a drafter aerie verifies, printing nothing', async () => {
    const out = join(dir, 'drafter');
    const r = sim(
      {},
      'specforge',
      'export',
      '--to',
      'sglang',
      '--checkpoint',
      join(dir, 'a'),
      '--draft-config',
      DRAFT,
      '--output-dir',
      out,
    );
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('');
    expect((await readdir(out)).sort()).toEqual(['config.json', 'model.safetensors']);
    const cfg = JSON.parse(await readFile(join(out, 'config.json'), 'utf8'));
    expect(verifyDrafter(cfg, parseSafetensorsHeader(await readFile(join(out, 'model.safetensors'))))).toEqual([]);
    expect(
      sim(
        {},
        'specforge',
        'export',
        '--to',
        'sglang',
        '--checkpoint',
        'x',
        '--draft-config',
        'y',
        '--output-dir',
        out,
        '--embedding-source',
        'z',
      ).status,
    ).toBe(2);
    const missing = sim(
      {},
      'specforge',
      'export',
      '--to',
      'sglang',
      '--checkpoint',
      join(dir, 'nope'),
      '--draft-config',
      DRAFT,
      '--output-dir',
      out,
    );
    expect(missing.status).toBe(1);
    expect(missing.stderr).toContain(
      "is not a training_state.pt, a checkpoint directory, or an output_dir with a '{run_id}-latest' pointer / step directories",
    );
  });
});
