/**
 * Golden argv for both real-cluster examples: every command each stage driver renders, exactly,
 * as `aerie plan` prints it and as the activities launch it (same spec builders). Secrets stay
 * ${VAR} references.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AERIE_HOME, parseConfigText } from '../../src/config/load.js';
import { planRun, renderPlan, type PlanStep } from '../../src/cli/plan.js';

const load = (name: string) => parseConfigText(readFileSync(join(AERIE_HOME, 'examples', name), 'utf8'), name, {});
const step = (steps: PlanStep[], stage: string, name: string): PlanStep => {
  const s = steps.find((x) => x.stage === stage && x.step === name);
  if (!s) throw new Error(`no step "${stage} · ${name}" in ${steps.map((x) => `${x.stage} · ${x.step}`).join(', ')}`);
  return s;
};
const RUN = '/data/aerie/runs/r1';

describe("examples/kimi-k2.5.yaml: aerie's capture, the specforge CLI offline, EAGLE3 topk 1 + spec v2", () => {
  const config = load('kimi-k2.5.yaml');
  const steps = planRun(config, 'r1');
  const server = [
    '/opt/sglang/venv/bin/python',
    '-m',
    'sglang.launch_server',
    '--model-path',
    '/models/Kimi-K2.5-INT4',
    '--host',
    '127.0.0.1',
    '--port',
    '30000',
    '--tp-size',
    '8',
    '--mem-fraction-static',
    '0.85',
  ];

  it('launches the target for regeneration at tp 8, secrets as references', () => {
    const s = step(steps, 'generate', 'launch generate server');
    expect(s.host).toBe('gpu8');
    expect(s.argv).toEqual([...server, '--trust-remote-code']);
    expect(s.env).toEqual({ PYTHONUNBUFFERED: '1', HF_TOKEN: '${HF_TOKEN}' });
  });

  it("tokenizes on the host as SpecForge does, with the target environment's python", () => {
    expect(step(steps, 'extract', 'tokenize as SpecForge does, then check free space').argv).toEqual([
      '/opt/sglang/venv/bin/python',
      '-m',
      'aerie_hs.tokens',
      '--model',
      '/models/Kimi-K2.5-INT4',
      '--chat-template',
      'kimi-k2-instruct',
      '--max-length',
      '4096',
      '--cross-check',
      'auto',
      '--trust-remote-code',
    ]);
  });

  it("launches the extraction profile with aerie's capture: its package on PYTHONPATH, the aux flags, no CUDA graphs, no radix cache", () => {
    const s = step(steps, 'extract', 'launch extract server');
    expect(s.argv).toEqual([
      ...server,
      '--cuda-graph-backend-decode',
      'disabled',
      '--cuda-graph-backend-prefill',
      'disabled',
      '--disable-radix-cache',
      '--enable-return-aux-hidden-states',
      '--speculative-algorithm',
      'EAGLE3',
      '--return-aux-hidden-state-layer-ids',
      '1',
      '2',
      '3',
      '--trust-remote-code',
    ]);
    expect(s.env).toEqual({
      PYTHONUNBUFFERED: '1',
      HF_TOKEN: '${HF_TOKEN}',
      AERIE_HS_DUMP_DIR: '/dev/shm/aerie-hs/r1',
      AERIE_HS_AUX_LAYERS: '[1,2,3]',
      PYTHONPATH: '/data/aerie/aerie-py/<version>',
    });
    expect(s.notes!.join('\n')).toContain(
      "the draft config's eagle_aux_hidden_state_layer_ids replace [1, 2, 3] (shown)",
    );
  });

  it('trains with `specforge train -c` offline from the converted files, with no vocab mapping file (SpecForge builds it)', () => {
    const t = step(steps, 'train', 'specforge train (detached)');
    expect(t.argv).toEqual(['/opt/specforge/venv/bin/specforge', 'train', '-c', `${RUN}/train/specforge.yaml`]);
    const file = t.files![`${RUN}/train/specforge.yaml`]!;
    expect(file).toContain(`\n  hidden_states_path: ${RUN}/hidden_states\n`);
    expect(file).toContain('\n  chat_template: kimi-k2-instruct\n');
    expect(file).not.toContain('vocab_mapping_path');
    expect(step(steps, 'train', 'specforge export (detached)').argv).not.toContain('--vocab-mapping');
  });

  it('deploys EAGLE3 3/1/4 on the drafter the trainer leaves, sized for the sweep', () => {
    const s = step(steps, 'deploy', 'launch deploy server');
    expect(s.argv).toEqual([
      ...server,
      '--max-running-requests',
      '250',
      '--speculative-algorithm',
      'EAGLE3',
      '--speculative-draft-model-path',
      `${RUN}/train/drafter`,
      '--speculative-num-steps',
      '3',
      '--speculative-eagle-topk',
      '1',
      '--speculative-num-draft-tokens',
      '4',
      '--trust-remote-code',
    ]);
    expect(s.env?.SGLANG_ENABLE_SPEC_V2).toBeUndefined();
    expect(s.notes).toContain('spec v2: always on from SGLang 0.5.15 (this host: 0.5.23); nothing to set');
  });

  it('prints the host with its exec prefix and never an expanded secret', () => {
    const text = renderPlan(config, steps, 'kimi-k2.5.yaml');
    expect(text).toContain('every command through: pct exec 129 --');
    expect(text).toContain('HF_TOKEN=${HF_TOKEN}');
    expect(text).toContain('host gpu8 (ssh pve-gpu, every command through: pct exec 129 --), workdir /data/aerie\n');
  });

  it('with a container network and a GPU subset: the forward address, the GPUs, and CUDA_VISIBLE_DEVICES on every launch', () => {
    const c = load('kimi-k2.5.yaml');
    const gpu8 = c.hosts.gpu8!;
    if (gpu8.kind !== 'ssh') throw new Error('gpu8 is an ssh host');
    gpu8['http-address'] = '192.0.2.129';
    gpu8.gpus = [0, 1, 2, 3];
    c.server['listen-host'] = '0.0.0.0';
    const planned = planRun(c, 'r1');
    const text = renderPlan(c, planned, 'kimi-k2.5.yaml');
    expect(text).toContain(
      'host gpu8 (ssh pve-gpu, every command through: pct exec 129 --, HTTP forwarded to 192.0.2.129), workdir /data/aerie, GPUs 0,1,2,3 only',
    );
    expect(step(planned, 'generate', 'launch generate server').argv).toEqual(
      expect.arrayContaining(['--host', '0.0.0.0']),
    );
    const launches = planned.filter((p) => p.env !== undefined);
    expect(launches.length).toBeGreaterThanOrEqual(4);
    for (const p of launches) expect(p.env!.CUDA_VISIBLE_DEVICES).toBe('0,1,2,3');
  });
});

describe("examples/llama3.1-8b.yaml: aerie's capture, current specforge CLI", () => {
  const config = load('llama3.1-8b.yaml');
  const steps = planRun(config, 'r1');
  const run = '/scratch/aerie/runs/r1';

  it("launches the target with aerie's capture for extraction, prepare_hidden_states.py not at all", () => {
    expect(steps.some((x) => x.step === 'prepare_hidden_states (detached)')).toBe(false);
    expect(step(steps, 'extract', 'launch extract server').argv).toEqual([
      '/opt/venv/bin/python',
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/models/Meta-Llama-3.1-8B-Instruct',
      '--host',
      '127.0.0.1',
      '--port',
      '30000',
      '--tp-size',
      '1',
      '--cuda-graph-backend-decode',
      'disabled',
      '--cuda-graph-backend-prefill',
      'disabled',
      '--disable-radix-cache',
      '--enable-return-aux-hidden-states',
      '--speculative-algorithm',
      'EAGLE3',
      '--return-aux-hidden-state-layer-ids',
      '1',
      '2',
      '3',
    ]);
  });

  it('with the offline driver instead: prepare_hidden_states.py with the CLI-era flags, no model server', () => {
    const c = load('llama3.1-8b.yaml');
    (c.stages as { extract: unknown }).extract = {
      driver: 'specforge-offline',
      launcher: [
        '/opt/venv/bin/torchrun',
        '--standalone',
        '--nproc_per_node',
        '8',
        '/opt/SpecForge/scripts/prepare_hidden_states.py',
      ],
      'chat-template': 'llama3',
      'max-length': 2048,
      'tp-size': 1,
      'batch-size': 32,
      'file-group-size': 2000,
      compress: false,
      'is-preformatted': false,
      'dist-timeout': 2000,
      python: '/opt/venv/bin/python',
      env: {},
      'extra-args': [],
      'crash-retries': 3,
    };
    const planned = planRun(c, 'r1');
    expect(planned.some((x) => x.step === 'launch extract server')).toBe(false);
    expect(step(planned, 'extract', 'prepare_hidden_states (detached)').argv).toEqual([
      '/opt/venv/bin/torchrun',
      '--standalone',
      '--nproc_per_node',
      '8',
      '/opt/SpecForge/scripts/prepare_hidden_states.py',
      '--target-model-path',
      '/models/Meta-Llama-3.1-8B-Instruct',
      '--draft-model-config',
      '/opt/SpecForge/configs/llama3-8B-eagle3.json',
      '--data-path',
      `${run}/data/train.jsonl`,
      '--output-path',
      `${run}/hidden_states`,
      '--chat-template',
      'llama3',
      '--max-length',
      '2048',
      '--tp-size',
      '1',
      '--batch-size',
      '32',
      '--file-group-size',
      '2000',
      '--dist-timeout',
      '2000',
    ]);
    // Its prepare step writes the vocab mapping, which train and export are then given (D9).
    expect(step(planned, 'train', 'specforge export (detached)').argv).toContain('--vocab-mapping');
  });

  it('writes the specforge config (offline data source) and runs `specforge train -c`, then export', () => {
    const t = step(steps, 'train', 'specforge train (detached)');
    expect(t.argv).toEqual(['/opt/venv/bin/specforge', 'train', '-c', `${run}/train/specforge.yaml`]);
    expect(t.files?.[`${run}/train/specforge.yaml`]).toBe(
      [
        '# written by aerie for this run; edit stages.train in the aerie config instead',
        'run_id: llama31-8b',
        `output_dir: ${run}/train/output`,
        'model:',
        '  target_model_path: /models/Meta-Llama-3.1-8B-Instruct',
        '  draft_model_config: /opt/SpecForge/configs/llama3-8B-eagle3.json',
        '  target_backend: sglang',
        'data:',
        `  hidden_states_path: ${run}/hidden_states`,
        '  max_length: 2048',
        '  chat_template: llama3',
        'training:',
        '  strategy: eagle3',
        '  num_epochs: 3',
        '  batch_size: 1',
        '  learning_rate: 0.0001',
        '  ttt_length: 7',
        '  save_interval: 1000',
        '  max_checkpoints: 3',
        'deployment:',
        '  trainer:',
        '    nproc_per_node: 8',
        '',
      ].join('\n'),
    );
    expect(step(steps, 'train', 'specforge export (detached)').argv).toEqual([
      '/opt/venv/bin/specforge',
      'export',
      '--to',
      'sglang',
      '--checkpoint',
      `${run}/train/output/llama31-8b-step<N>`,
      '--draft-config',
      '/opt/SpecForge/configs/llama3-8B-eagle3.json',
      '--output-dir',
      `${run}/train/drafter`,
    ]);
  });

  it('says which SpecForge revision the plan is for and what follows from it', () => {
    const notes = step(steps, 'train', 'specforge train (detached)').notes!.join('\n');
    expect(notes).toContain('SpecForge revision: detected at preflight (auto); driver specforge drives cli');
    expect(notes).toContain('resume: training.resume_from=<newest complete <run>-step<N>> at the same world size');
    expect(notes).toContain('final checkpoint: saved when training ends');
  });

  it('deploys the exported drafter with EAGLE3', () => {
    expect(step(steps, 'deploy', 'launch deploy server').argv).toEqual([
      '/opt/venv/bin/python',
      '-m',
      'sglang.launch_server',
      '--model-path',
      '/models/Meta-Llama-3.1-8B-Instruct',
      '--host',
      '127.0.0.1',
      '--port',
      '30000',
      '--tp-size',
      '1',
      '--max-running-requests',
      '250',
      '--speculative-algorithm',
      'EAGLE3',
      '--speculative-draft-model-path',
      `${run}/train/drafter`,
      '--speculative-num-steps',
      '3',
      '--speculative-eagle-topk',
      '1',
      '--speculative-num-draft-tokens',
      '4',
    ]);
  });
});

describe("the demo (simulator): aerie's capture, then the current CLI offline, as on a real host today", () => {
  const config = load('demo.yaml');
  const steps = planRun(config, 'r1');

  it("extracts through the simulated server with aerie's capture and trains with `specforge train -c` from the converted files", () => {
    expect(step(steps, 'extract', 'launch extract server').argv).toContain('--enable-return-aux-hidden-states');
    expect(step(steps, 'extract', 'tokenize as SpecForge does, then check free space').argv?.[0]).toMatch(
      /\.venv-specforge\/bin\/python$/,
    );
    const t = step(steps, 'train', 'specforge train (detached)');
    expect(t.argv?.slice(1, 4)).toEqual(['specforge', 'train', '-c']);
    const file = Object.values(t.files ?? {})[0]!;
    expect(file).toMatch(/\n {2}hidden_states_path: .*\/hidden_states\n/);
    expect(file).not.toContain('train_data_path');
    expect(step(steps, 'train', 'specforge export (detached)').argv).not.toContain('--vocab-mapping');
  });

  it('a pinned revision is printed as pinned, with its behaviours', () => {
    const c = load('demo.yaml');
    if (c.stages.train.driver !== 'specforge') throw new Error('the demo trains with the CLI');
    c.stages.train['specforge-revision'] = 'cli';
    expect(step(planRun(c, 'r1'), 'train', 'specforge train (detached)').notes).toContain(
      'SpecForge revision cli (pinned): SpecForge CLI (a6b6b023 / PyPI specforge 0.2.0)',
    );
  });
});

describe('the v0.2 scripts: the revision decides resume and the final save', () => {
  it('auto lists what each v0.2 revision implies; a pin names one', () => {
    const c = load('demo.yaml');
    (c.stages as { train: unknown }).train = {
      driver: 'specforge-v0.2',
      'specforge-revision': 'auto',
      launcher: ['torchrun', '/opt/SpecForge/scripts/train_eagle3.py'],
      'draft-model-config': '/d.json',
      env: {},
      'crash-retries': 3,
      'chat-template': 'llama3',
      'num-epochs': 1,
      'batch-size': 1,
      'learning-rate': 1e-4,
      'max-length': 2048,
      'ttt-length': 7,
      'save-interval': 10,
      'tp-size': 1,
      'extra-args': [],
    };
    const notes = step(planRun(c, 'r1'), 'train', 'train_eagle3.py (detached)').notes!.join('\n');
    expect(notes).toMatch(
      /detected at preflight \(auto\) from the launcher's train_eagle3.py: v0.2.0, v0.2-final-save, v0.2-resume/,
    );
    expect(notes).toMatch(
      /v0.2.0: resume: --resume here matches only epoch_N directories.*aerie links resume_step_N\/epoch_0 .*; final checkpoint: none/,
    );
    expect(notes).toMatch(
      /v0.2-resume: resume: --resume, after aerie moves a damaged newest checkpoint aside \(it restores optimizer, scheduler and data position from 6d01edb5/,
    );
    (c.stages.train as { 'specforge-revision': string })['specforge-revision'] = 'v0.2-final-save';
    expect(step(planRun(c, 'r1'), 'train', 'train_eagle3.py (detached)').notes).toContain(
      'SpecForge revision v0.2-final-save (pinned): SpecForge v0.2 scripts, 03a3dedb…961ca7c3^',
    );
  });
});
