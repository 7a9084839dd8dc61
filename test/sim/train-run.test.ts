/**
 * Runs the simulated trainer as aerie does: `node bin/aerie-sim.mjs train <v0.2 flags>` in its
 * own process group, and drives crash → continue with the stage functions aerie uses.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, promises as fs } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  classifyTrainFailure,
  latestCheckpoint,
  parseSafetensorsHeader,
  parseTrainProgress,
  planTrainResume,
  rankCheckpoints,
  renderTrainArgv,
  safetensorsHeaderLength,
  segmentBases,
  verifyDrafter,
  type SegmentListing,
  type TrainLaunch,
} from '../../src/stages/train.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(ROOT, 'bin/aerie-sim.mjs');
const LAUNCHER = [process.execPath, BIN, 'train'];
const FAST = { AERIE_SIM_TIME_SCALE: '0.002' };

let tmp: string;
let live: ChildProcess[] = [];

interface Done {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function start(argv: string[], env: Record<string, string> = {}): { child: ChildProcess; done: Promise<Done>; out: () => string; err: () => string } {
  const [cmd, ...rest] = argv;
  const child = spawn(cmd, rest, { cwd: ROOT, env: { ...process.env, ...FAST, ...env }, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  live.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const done = new Promise<Done>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, done, out: () => stdout, err: () => stderr };
}

const run = (argv: string[], env: Record<string, string> = {}): Promise<Done> => start(argv, env).done;

async function waitFor(cond: () => boolean | Promise<boolean>, what: string, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** Reads a checkpoint the way aerie's verifier does; throws if any part is missing or short. */
async function readCheckpoint(dir: string): Promise<{ config: Record<string, unknown>; problems: string[]; files: string[] }> {
  const files = (await fs.readdir(dir)).sort();
  const config = JSON.parse(await fs.readFile(path.join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const fh = await fs.open(path.join(dir, 'model.safetensors'), 'r');
  try {
    const first8 = Buffer.alloc(8);
    await fh.read(first8, 0, 8, 0);
    const n = safetensorsHeaderLength(first8);
    const buf = Buffer.alloc(8 + n);
    await fh.read(buf, 0, 8 + n, 0);
    const parsed = parseSafetensorsHeader(buf);
    const ends = Object.entries(parsed.header)
      .filter(([k]) => k !== '__metadata__')
      .map(([, v]) => (v as { data_offsets: [number, number] }).data_offsets[1]);
    expect((await fh.stat()).size).toBe(8 + n + Math.max(...ends));
    return { config, problems: verifyDrafter(config, parsed), files };
  } finally {
    await fh.close();
  }
}

function launch(outputDir: string, over: Partial<TrainLaunch> = {}): TrainLaunch {
  return {
    launcher: LAUNCHER,
    targetModelPath: path.join(tmp, 'target'),
    draftModelConfig: path.join(tmp, 'draft.json'),
    trainDataPath: path.join(tmp, 'data.jsonl'),
    outputDir,
    chatTemplate: 'llama3',
    maxLength: 512,
    numEpochs: 2,
    batchSize: 3,
    learningRate: 1e-4,
    tttLength: 7,
    tpSize: 1,
    saveInterval: 3,
    extraArgs: [],
    ...over,
  };
}

async function listSegments(outputDir: string): Promise<SegmentListing[]> {
  const top = await fs.readdir(outputDir);
  const segs: SegmentListing[] = [{ dir: outputDir, baseStep: 0, entries: top }];
  for (const base of segmentBases(top)) {
    const dir = path.join(outputDir, `resume_step_${base}`);
    segs.push({ dir, baseStep: base, entries: await fs.readdir(dir) });
  }
  return segs;
}

beforeAll(async () => {
  tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'aerie-train-'));
  await fs.mkdir(path.join(tmp, 'target'));
  await fs.writeFile(path.join(tmp, 'target/config.json'), JSON.stringify({ architectures: ['LlamaForCausalLM'], hidden_size: 8, vocab_size: 64 }));
  const draft = {
    architectures: ['LlamaForCausalLMEagle3'],
    model_type: 'llama',
    hidden_size: 8,
    intermediate_size: 16,
    num_attention_heads: 2,
    num_key_value_heads: 2,
    num_hidden_layers: 1,
    vocab_size: 64,
    draft_vocab_size: 16,
    max_position_embeddings: 512,
  };
  await fs.writeFile(path.join(tmp, 'draft.json'), JSON.stringify(draft));
  const rows = Array.from({ length: 10 }, (_, i) => JSON.stringify({ id: `s${i}`, conversations: [{ role: 'user', content: `q${i}` }, { role: 'assistant', content: `a${i}` }] }));
  await fs.writeFile(path.join(tmp, 'data.jsonl'), `${rows.join('\n')}\n`);
  expect(existsSync(BIN)).toBe(true);
});

afterEach(() => {
  for (const c of live) {
    if (c.exitCode === null && c.signalCode === null && c.pid) {
      try {
        process.kill(-c.pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
  live = [];
});

afterAll(async () => {
  await fs.rm(tmp, { recursive: true, force: true });
});

describe('aerie-sim train (SpecForge v0.2 stand-in)', () => {
  it('trains, saves every --save-interval steps and at the end, and the drafter passes verifyDrafter', async () => {
    const out = path.join(tmp, 'plain');
    const r = await run(renderTrainArgv(launch(out)));
    expect(r.code, r.stderr).toBe(0);
    expect((await fs.readdir(out)).sort()).toEqual(['epoch_0_step_3', 'epoch_1_step_6', 'epoch_1_step_8']);
    expect(r.stdout).toContain('rank 0: Auto-calculated total_steps: 8 (num_epochs=2 * steps_per_epoch=4)');
    expect(r.stdout).toContain(`Saved model configuration to ${out}/epoch_0_step_3\n`);
    expect(r.stdout).toContain('Training completed at step 8, saving final checkpoint...');
    const p = parseTrainProgress(r.stdout + r.stderr);
    expect([p.epoch, p.step, p.totalSteps, p.stepsPerEpoch, p.lastCheckpoint]).toEqual([1, 8, 8, 4, `${out}/epoch_1_step_8`]);
    expect(p.loss).toBeGreaterThan(0);
    expect(p.acc).toBeGreaterThan(0);
    const fin = await readCheckpoint(path.join(out, latestCheckpoint(await fs.readdir(out))!.dir));
    expect(fin.files).toEqual(['config.json', 'model.safetensors', 'training_state.pt']);
    expect(fin.problems).toEqual([]);
    expect(fin.config.aerie_sim).toMatchObject({ trained_sample_epochs: 20, trained_steps: 8 });
    expect((fin.config.aerie_sim as { accept_length: number }).accept_length).toBeGreaterThan(1.5);
  }, 60_000);

  it('never shows a checkpoint directory before it is complete', async () => {
    const data = path.join(tmp, 'data60.jsonl');
    await fs.writeFile(data, Array.from({ length: 60 }, (_, i) => JSON.stringify({ id: `r${i}`, conversations: [] })).join('\n'));
    const out = path.join(tmp, 'atomic');
    const t = start(renderTrainArgv(launch(out, { trainDataPath: data, batchSize: 1, numEpochs: 1, saveInterval: 2 })), { AERIE_SIM_TIME_SCALE: '0.01' });
    const checked = new Set<string>();
    const sweep = async (): Promise<void> => {
      for (const name of await fs.readdir(out).catch(() => [] as string[])) {
        if (checked.has(name) || latestCheckpoint([name]) === null) continue;
        const ck = await readCheckpoint(path.join(out, name));
        expect(ck.files, name).toEqual(['config.json', 'model.safetensors', 'training_state.pt']);
        checked.add(name);
      }
    };
    let exited = false;
    void t.done.then(() => (exited = true));
    while (!exited) {
      await sweep();
      await new Promise((r) => setTimeout(r, 2));
    }
    const seenWhileRunning = checked.size;
    await sweep();
    expect((await t.done).code).toBe(0);
    expect(checked.size).toBe(30);
    expect(seenWhileRunning).toBeGreaterThan(3);
    expect((await fs.readdir(out)).filter((n) => n.startsWith('.'))).toEqual([]);
  }, 60_000);

  it('crash at a step, then continuing from the newest checkpoint, ends where an uninterrupted run ends', async () => {
    const plain = path.join(tmp, 'reference');
    expect((await run(renderTrainArgv(launch(plain)))).code).toBe(0);
    const reference = await readCheckpoint(path.join(plain, 'epoch_1_step_8'));

    const out = path.join(tmp, 'crashy');
    const faults = { AERIE_SIM_TRAIN_CRASH_AT_STEP: '5', AERIE_SIM_FAULT_ONCE: path.join(tmp, 'crash-once') };
    const first = launch(out);
    const crashed = await run(renderTrainArgv(first), faults);
    expect(crashed.code).toBe(1);
    expect(crashed.stderr).toContain('[rank0]: Traceback (most recent call last):');
    expect(crashed.stderr).toContain('ChildFailedError');
    expect(classifyTrainFailure(crashed.stderr)).toMatchObject({ kind: 'crash', retryable: true });
    expect(await fs.readdir(out)).toEqual(['epoch_0_step_3']);
    expect(existsSync(faults.AERIE_SIM_FAULT_ONCE)).toBe(true);

    const stepsPerEpoch = parseTrainProgress(crashed.stdout + crashed.stderr).stepsPerEpoch!;
    const plan = planTrainResume(first, rankCheckpoints(await listSegments(out))[0], stepsPerEpoch);
    if (plan.kind !== 'continue') throw new Error(`expected a continuation, got ${plan.kind}`);
    expect([plan.from.dir, plan.stepsOwed, plan.launch.outputDir]).toEqual([`${out}/epoch_0_step_3`, 5, `${out}/resume_step_3`]);

    const cont = await run(renderTrainArgv(plan.launch), faults); // same env: the one-shot crash does not fire again
    expect(cont.code, cont.stderr).toBe(0);
    expect(cont.stdout).toContain(`Finetuning from base model: ${out}/epoch_0_step_3\n`);
    const done = planTrainResume(first, rankCheckpoints(await listSegments(out))[0], stepsPerEpoch);
    if (done.kind !== 'done') throw new Error(`expected done, got ${done.kind}`);
    expect([done.finalCheckpoint.dir, done.finalCheckpoint.totalStep]).toEqual([`${out}/resume_step_3/epoch_1_step_5`, 8]);
    const fin = await readCheckpoint(done.finalCheckpoint.dir);
    expect(fin.problems).toEqual([]);
    expect(fin.config).toEqual(reference.config);
  }, 90_000);

  it('--resume restarts from scratch in v0.2.0 as released, and continues in place in the March 2026 revision', async () => {
    const faults = { AERIE_SIM_TRAIN_CRASH_AT_STEP: '5' };
    const released = path.join(tmp, 'resume-released');
    expect((await run(renderTrainArgv(launch(released)), faults)).code).toBe(1);
    const again = await run([...renderTrainArgv(launch(released)), '--resume'], { AERIE_SIM_TRAIN_CRASH_AT_STEP: '0' });
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('Last checkpoint detected: None\n');
    expect(again.stdout).toContain('Starting training from epoch 0\n');
    expect(again.stderr).toContain('Training Epoch 0:  25%');

    const fixed = path.join(tmp, 'resume-fixed');
    const rev = { AERIE_SIM_SPECFORGE_REV: '2026-03' };
    expect((await run(renderTrainArgv(launch(fixed)), { ...faults, ...rev })).code).toBe(1);
    const cont = await run([...renderTrainArgv(launch(fixed)), '--resume'], rev);
    expect(cont.code, cont.stderr).toBe(0);
    expect(cont.stdout).toContain(`Loaded training state from ${fixed}/epoch_0_step_3/training_state.pt: epoch=0, step=3\n`);
    expect(cont.stdout).toContain('Starting training from epoch:0          step:3\n');
    expect(cont.stderr).not.toContain('Training Epoch 0:  25%');
    expect((await fs.readdir(fixed)).sort()).toEqual(['epoch_0_step_3', 'epoch_1_step_6', 'epoch_1_step_8']);
    const a = await readCheckpoint(path.join(fixed, 'epoch_1_step_8'));
    const b = await readCheckpoint(path.join(released, 'epoch_1_step_8'));
    expect(a.config).toEqual(b.config);
  }, 90_000);

  it('an OOM dies with torch.OutOfMemoryError, exit 1, classified as not retryable', async () => {
    const out = path.join(tmp, 'oom');
    const r = await run(renderTrainArgv(launch(out)), { AERIE_SIM_FAULT: 'train-oom' });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('torch.OutOfMemoryError: CUDA out of memory.');
    expect(classifyTrainFailure(r.stderr)).toMatchObject({ kind: 'oom', retryable: false });
    expect(await fs.readdir(out).catch(() => [])).toEqual([]);
  }, 60_000);

  it('an unknown flag is an argparse error, exit 2', async () => {
    const r = await run([...renderTrainArgv(launch(path.join(tmp, 'bad'))), '--bogus']);
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n').pop()).toBe('train_eagle3.py: error: unrecognized arguments: --bogus');
    expect(classifyTrainFailure(r.stderr).kind).toBe('usage');
  }, 60_000);

  it('offline, an epoch is the .ckpt files under the hidden-states path; none means zero steps and no checkpoint', async () => {
    const hs = path.join(tmp, 'hs/rows_0-2000');
    await fs.mkdir(hs, { recursive: true });
    for (let i = 0; i < 5; i++) await fs.writeFile(path.join(hs, `data_${i}.ckpt`), 'x');
    await fs.writeFile(path.join(hs, 'notes.txt'), 'not a sample');
    const r = await run(renderTrainArgv(launch(path.join(tmp, 'offline'), { hiddenStatesPath: path.join(tmp, 'hs'), batchSize: 2, numEpochs: 1 })));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('total_steps: 3 (num_epochs=1 * steps_per_epoch=3)');

    const empty = path.join(tmp, 'offline-empty');
    const e = await run(renderTrainArgv(launch(empty, { hiddenStatesPath: path.join(tmp, 'no-such-dir') })));
    expect(e.code).toBe(0);
    expect(e.stdout).toContain('total_steps: 0 (num_epochs=2 * steps_per_epoch=0)');
    expect(existsSync(empty)).toBe(false);
  }, 60_000);

  it('SIGTERM to its process group stops it promptly and leaves no partial checkpoint', async () => {
    const out = path.join(tmp, 'term');
    const data = path.join(tmp, 'data500.jsonl');
    await fs.writeFile(data, Array.from({ length: 500 }, (_, i) => JSON.stringify({ id: `t${i}` })).join('\n'));
    const t = start(renderTrainArgv(launch(out, { trainDataPath: data, batchSize: 1, saveInterval: 1 })), { AERIE_SIM_TIME_SCALE: '0.02' });
    await waitFor(async () => (await fs.readdir(out).catch(() => [])).length >= 2, 'two checkpoints');
    const sent = Date.now();
    process.kill(-t.child.pid!, 'SIGTERM');
    const r = await t.done;
    expect(Date.now() - sent).toBeLessThan(5_000);
    expect(r.code).toBe(143);
    const left = await fs.readdir(out);
    expect(left.filter((n) => n.startsWith('.'))).toEqual([]);
    for (const name of left) expect((await readCheckpoint(path.join(out, name))).problems).toEqual([]);
  }, 60_000);
});
