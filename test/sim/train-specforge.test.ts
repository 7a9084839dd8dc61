/**
 * The simulated current SpecForge CLI: strict config with dotted overrides, exactly one data
 * source, resume at the same world size only, and export as the only way to a servable drafter.
 */
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadRunConfig } from '../../sim/specforge/config.js';

const ROOT = resolve(import.meta.dirname, '../..');
let dir: string;
const sim = (...args: string[]) => spawnSync(process.execPath, [join(ROOT, 'bin/aerie-sim.mjs'), ...args], { encoding: 'utf8', env: { ...process.env, AERIE_SIM_TIME_SCALE: '0' } });

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'aerie-sf-'));
  const rows = (await readFile(join(ROOT, 'examples/data/prompts.jsonl'), 'utf8')).split('\n').filter(Boolean).slice(0, 4);
  await writeFile(join(dir, 'd.jsonl'), rows.join('\n') + '\n');
  await writeFile(join(dir, 'cfg.yaml'), [
    'run_id: t', `output_dir: ${join(dir, 'out')}`,
    'model:', `  target_model_path: ${join(ROOT, 'examples/models/sim-llama-8b')}`, `  draft_model_config: ${join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json')}`,
    'data:', `  train_data_path: ${join(dir, 'd.jsonl')}`,
    'training:', '  num_epochs: 1', '  save_interval: 2',
  ].join('\n'));
});
afterAll(async () => rm(dir, { recursive: true, force: true }));

describe('aerie-sim specforge', () => {
  it('validates like pydantic: unknown fields, wrong types and two data sources are errors', () => {
    expect(() => loadRunConfig('model: {target_model_path: /m}\ndata: {train_data_path: /d}\n', ['training.num_epochs=2', 'training.learning_rate=1e-4'])).not.toThrow();
    expect(() => loadRunConfig('model: {target_model_path: /m}\ndata: {train_data_path: /d, hidden_states_path: /h}\n', [])).toThrow(/set exactly one of/);
    expect(() => loadRunConfig('model: {target_model_path: /m}\ndata: {train_data_path: /d}\n', ['training.epochs=2'])).toThrow(/training.epochs\n  Extra inputs are not permitted/);
    expect(() => loadRunConfig('model: {}\ndata: {train_data_path: /d}\n', ['training.num_epochs=two'])).toThrow(/model.target_model_path\n  Field required[\s\S]*valid integer/);
  });

  it('trains, checkpoints as <run>-step<N> with a -latest link, and resumes only at the same world size', async () => {
    const first = sim('specforge', 'train', '-c', join(dir, 'cfg.yaml'));
    expect(first.status).toBe(0);
    expect((await readdir(join(dir, 'out'))).sort()).toEqual(['t-latest', 't-step2', 't-step4']);
    const again = sim('specforge', 'train', '-c', join(dir, 'cfg.yaml'), `training.resume_from=${join(dir, 'out')}`, 'training.num_epochs=2');
    expect(again.stdout).toContain(`Resuming from ${join(dir, 'out', 't-step4')}: global_step=4`);
    expect(again.status).toBe(0);
    const wider = sim('specforge', 'train', '-c', join(dir, 'cfg.yaml'), `training.resume_from=${join(dir, 'out', 't-step2')}`, 'deployment.trainer.nproc_per_node=2');
    expect(wider.status).toBe(1);
    expect(wider.stderr).toMatch(/world_size=2 \(written at world_size=1\)/);
  });

  it('exports a checkpoint to a drafter SGLang can serve', async () => {
    const out = join(dir, 'drafter');
    const r = sim('specforge', 'export', '--to', 'sglang', '--checkpoint', join(dir, 'out', 't-latest'), '--draft-config', join(ROOT, 'examples/models/sim-llama-8b-eagle3-draft.json'), '--output-dir', out);
    expect(r.status).toBe(0);
    expect((await readdir(out)).sort()).toEqual(['config.json', 'model.safetensors']);
    expect(JSON.parse(await readFile(join(out, 'config.json'), 'utf8')).architectures).toEqual(['LlamaForCausalLMEagle3']);
    expect(sim('specforge', 'export', '--to', 'sglang', '--checkpoint', 'x', '--draft-config', 'y', '--output-dir', out, '--embedding-source', 'z').status).toBe(2);
  });
});
