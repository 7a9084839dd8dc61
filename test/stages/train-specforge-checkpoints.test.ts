import { mkdir, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import {
  checkpointProblem,
  listSpecforgeCheckpoints,
  newestCompleteCheckpoint,
  planSpecforgeResume,
  specforgeWorldSize,
} from '../../src/stages/train/specforge-checkpoints.js';
import { useLocalHost } from '../support/local-host.js';

const fx = useLocalHost('aerie-sfckpt-', { each: true, sub: 'work' });
let dir: string;
let host: LocalHost;

beforeEach(async () => {
  ({ dir, host } = fx);
});

/** A `<run>-step<N>` directory holding the named files (empty when the size is 0). */
async function ckpt(run: string, step: number, files: Record<string, number>): Promise<string> {
  const d = join(dir, 'out', `${run}-step${step}`);
  await mkdir(d, { recursive: true });
  for (const [name, size] of Object.entries(files)) await writeFile(join(d, name), 'x'.repeat(size));
  return d;
}
const full = (world: number): Record<string, number> => {
  const f: Record<string, number> = { 'training_state.pt': 100 };
  for (let r = 0; r < world; r++) f[`training_state_rank${r}.pt`] = 10;
  return f;
};

describe('listSpecforgeCheckpoints', () => {
  it("lists the run's step dirs newest first with their files, and what -latest points at", async () => {
    await ckpt('demo', 4, full(2));
    await ckpt('demo', 8, full(2));
    await ckpt('other', 12, full(2));
    // HEAD's link is relative, the bare directory name (checkpoint.py:440).
    await symlink('demo-step8', join(dir, 'out', 'demo-latest'));
    await writeFile(join(dir, 'out', 'demo.best_meta.json'), '{}');
    const l = await listSpecforgeCheckpoints(host, join(dir, 'out'), 'demo');
    expect(l.checkpoints.map((c) => c.step)).toEqual([8, 4]);
    expect(l.checkpoints[0]!.files).toEqual(full(2));
    expect(l.latest).toEqual({ target: 'demo-step8', dir: join(dir, 'out', 'demo-step8'), step: 8 });
    expect(l.best).toBeUndefined();
    expect((await listSpecforgeCheckpoints(host, `${join(dir, 'out')}/`, 'demo')).latest?.dir).toBe(
      join(dir, 'out', 'demo-step8'),
    );
  });

  it('is empty for an output dir that does not exist yet', async () => {
    expect(await listSpecforgeCheckpoints(host, join(dir, 'nope'), 'demo')).toEqual({ checkpoints: [] });
  });
});

describe('newestCompleteCheckpoint', () => {
  it('skips a save cut short: rank 1 had not written its file when rank 0 wrote training_state.pt', async () => {
    await ckpt('demo', 4, full(2));
    await ckpt('demo', 8, {
      'training_state.pt': 100,
      'training_state_rank0.pt': 10,
      'training_state_rank1.pt.tmp': 5,
    });
    const l = await listSpecforgeCheckpoints(host, join(dir, 'out'), 'demo');
    expect(newestCompleteCheckpoint(l, 2)?.step).toBe(4);
    expect(checkpointProblem(l.checkpoints[0]!, 2)).toMatch(/lacks training_state_rank1\.pt/);
    // At world size 1 the step-8 files are all there.
    expect(newestCompleteCheckpoint(l, 1)?.step).toBe(8);
  });

  it('never counts an empty file, a missing shared state or a .tmp in flight', async () => {
    await ckpt('demo', 2, full(1));
    await ckpt('demo', 4, { 'training_state.pt': 0, 'training_state_rank0.pt': 10 });
    await ckpt('demo', 6, { 'training_state_rank0.pt': 10 });
    await ckpt('demo', 8, { 'training_state.pt.tmp': 100, 'training_state_rank0.pt': 10 });
    const l = await listSpecforgeCheckpoints(host, join(dir, 'out'), 'demo');
    expect(newestCompleteCheckpoint(l, 1)?.dir).toBe(join(dir, 'out', 'demo-step2'));
  });

  it('refuses a checkpoint written at a larger world size (HEAD would not resume it)', async () => {
    await ckpt('demo', 4, full(1));
    await ckpt('demo', 8, full(2));
    const l = await listSpecforgeCheckpoints(host, join(dir, 'out'), 'demo');
    expect(newestCompleteCheckpoint(l, 1)?.step).toBe(4);
    expect(checkpointProblem(l.checkpoints[0]!, 1)).toMatch(/larger world size/);
  });

  it('ignores directories that are not <run>-step<N>', async () => {
    await ckpt('demo', 4, full(1));
    await mkdir(join(dir, 'out', '.demo-step9.tmp-123'), { recursive: true });
    await writeFile(join(dir, 'out', '.demo-step9.tmp-123', 'training_state.pt'), 'x');
    await ckpt('demo', 10, full(1)).then((d) => rm(d, { recursive: true }));
    const l = await listSpecforgeCheckpoints(host, join(dir, 'out'), 'demo');
    expect(l.checkpoints.map((c) => c.step)).toEqual([4]);
  });

  it('takes plain listings too, newest step first whatever their order', () => {
    const a = { step: 3, dir: '/o/r-step3', files: full(1) };
    const b = { step: 10, dir: '/o/r-step10', files: full(1) };
    expect(newestCompleteCheckpoint([a, b], 1)).toBe(b);
  });
});

describe('planSpecforgeResume', () => {
  const out = () => join(dir, 'out');
  const latest = (step: number) => symlink(`demo-step${step}`, join(out(), 'demo-latest'));
  const plan = async (world: number) => planSpecforgeResume(await listSpecforgeCheckpoints(host, out(), 'demo'), world);

  it('resumes the newest checkpoint with every rank file, naming the save cut short it passed over', async () => {
    await ckpt('demo', 4, full(2));
    await ckpt('demo', 8, { 'training_state.pt': 100, 'training_state_rank0.pt': 10 });
    await latest(4);
    const p = await plan(2);
    expect(p).toMatchObject({ kind: 'resume', checkpoint: { step: 4 } });
    expect(p.kind === 'resume' && p.skipped).toEqual([
      `${join(out(), 'demo-step8')} lacks training_state_rank1.pt (a save cut short)`,
    ]);
  });

  it('refuses at one rank what two ranks wrote, though the save cut short looks complete at one (-latest proves the world size)', async () => {
    await ckpt('demo', 4, full(2));
    await ckpt('demo', 8, { 'training_state.pt': 100, 'training_state_rank0.pt': 10 });
    await latest(4);
    expect(await plan(1)).toEqual({
      kind: 'world-mismatch',
      writtenAt: 2,
      worldSize: 1,
      evidence: 'demo-step4 (what -latest points at) holds training_state_rank0.pt … training_state_rank1.pt',
    });
  });

  it('refuses at two ranks what one rank wrote, rather than starting over (whose first save would delete later steps)', async () => {
    await ckpt('demo', 4, full(1));
    await ckpt('demo', 8, full(1));
    await latest(8);
    expect(await plan(2)).toMatchObject({ kind: 'world-mismatch', writtenAt: 1, worldSize: 2 });
  });

  it('without -latest, an older step proves the world size; the newest alone proves only a larger one', async () => {
    await ckpt('demo', 4, full(2));
    await ckpt('demo', 8, { 'training_state.pt': 100, 'training_state_rank0.pt': 10 });
    expect(await plan(1)).toMatchObject({
      kind: 'world-mismatch',
      writtenAt: 2,
      evidence: 'demo-step4 holds training_state_rank0.pt … training_state_rank1.pt',
    });
    await rm(join(out(), 'demo-step4'), { recursive: true });
    // One directory, two ranks' files: at least two ranks wrote it.
    await ckpt('demo', 12, full(2));
    await rm(join(out(), 'demo-step8'), { recursive: true });
    expect(await plan(1)).toMatchObject({
      kind: 'world-mismatch',
      writtenAt: 2,
      evidence: 'demo-step12 holds training_state_rank1.pt',
    });
  });

  it('a first save cut short proves nothing: resumed at one rank, it is left for SpecForge to refuse', async () => {
    await ckpt('demo', 4, { 'training_state.pt': 100, 'training_state_rank0.pt': 10 });
    expect(await plan(1)).toMatchObject({ kind: 'resume', checkpoint: { step: 4 } });
    expect(await plan(2)).toEqual({
      kind: 'fresh',
      skipped: [`${join(out(), 'demo-step4')} lacks training_state_rank1.pt (a save cut short)`],
    });
  });

  it('a -latest whose target a rewind deleted is no evidence', async () => {
    await ckpt('demo', 4, full(2));
    await latest(8);
    expect(await plan(2)).toMatchObject({ kind: 'resume', checkpoint: { step: 4 } });
  });
});

describe('specforgeWorldSize', () => {
  it('is nnodes × nproc_per_node, each 1 by default (schema.py:245-246)', () => {
    expect(specforgeWorldSize({ nnodes: 2, nproc_per_node: 4 })).toBe(8);
    expect(specforgeWorldSize({ nproc_per_node: 2 })).toBe(2);
    expect(specforgeWorldSize(undefined)).toBe(1);
  });
});
