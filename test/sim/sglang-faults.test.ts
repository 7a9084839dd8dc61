import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MODEL, Sim, makeDrafter, runToExit, tempDir, until } from '../support/sim-sglang.js';
import { removeWorkdir } from '../support/workdir.js';
import { startFakeServer } from '../support/fake-server.js';

describe('simulated SGLang server: launch failures and injected faults', () => {
  let scratch: string;
  let drafter: string;
  beforeAll(async () => {
    scratch = await tempDir('aerie-sim-faults-');
    drafter = await makeDrafter(2.5);
  });
  afterAll(async () => {
    await removeWorkdir(scratch);
    await removeWorkdir(drafter);
  });

  it('missing-module: the interpreter has no sglang; exit 1 at once with its message', async () => {
    const sim = await runToExit(['--model-path', MODEL], { AERIE_SIM_FAULT: 'missing-module' });
    expect(sim.exitCode).toBe(1);
    expect(sim.stderr.trim()).toBe(
      "/usr/bin/python3: Error while finding module specification for 'sglang.launch_server' (ModuleNotFoundError: No module named 'sglang')",
    );
  });

  it('an unknown flag is an argparse error: exit 2', async () => {
    const sim = await runToExit(['--model-path', MODEL, '--no-such-flag', '3']);
    expect(sim.exitCode).toBe(2);
    // 0.5.23 (the default release) names its parser 'sglang serve' (sim/sglang/args.ts progFor).
    expect(sim.stderr).toContain('sglang serve: error: unrecognized arguments: --no-such-flag 3');
  });

  it('a model path without config.json and a missing draft path both end in a traceback, exit 1', async () => {
    const [noModel, noDraft] = await Promise.all([
      runToExit(['--model-path', path.join(scratch, 'nowhere')]),
      runToExit([
        '--model-path',
        MODEL,
        '--speculative-algorithm',
        'EAGLE3',
        '--speculative-draft-model-path',
        path.join(scratch, 'no-draft'),
      ]),
    ]);
    expect(noModel.exitCode).toBe(1);
    expect(noModel.stderr).toMatch(/^Traceback \(most recent call last\):/);
    expect(noModel.stderr).toContain("OSError: Can't load the configuration of");
    expect(noDraft.exitCode).toBe(1);
    expect(noDraft.stderr).toContain('Scheduler hit an exception: Traceback (most recent call last):');
    expect(noDraft.stderr).toContain(`OSError: Can't load the configuration of '${path.join(scratch, 'no-draft')}'`);
  });

  it('exit-during-load and oom-during-load die mid weight-load with their tracebacks', async () => {
    const [exit, oom] = await Promise.all([
      runToExit(['--model-path', MODEL], { AERIE_SIM_FAULT: 'exit-during-load' }),
      runToExit(['--model-path', MODEL], { AERIE_SIM_FAULT: 'oom-during-load' }),
    ]);
    for (const sim of [exit, oom]) {
      expect(sim.exitCode).toBe(1);
      expect(sim.stderr).toContain('Load weight begin.');
      expect(sim.stderr).not.toContain('Load weight end.');
      expect(sim.stderr).toContain('Traceback (most recent call last):');
    }
    expect(oom.stderr).toContain('torch.OutOfMemoryError: CUDA out of memory. Tried to allocate');
  });

  it('nothing listens during the load: connections are refused until uvicorn binds after it', async () => {
    // A slow load (time scale 0.05 → ~1.5 s of weights) leaves room to probe the port mid-load.
    const sim = await Sim.start(['--model-path', MODEL], { AERIE_SIM_TIME_SCALE: '0.05' });
    try {
      await until('the weight load to begin', 15_000, () =>
        sim.stderr.includes('Load weight begin.') ? true : undefined,
      );
      expect(sim.stderr).not.toContain('Load weight end.');
      expect(await sim.status('/health')).toBeNull();
      await until('the uvicorn line', 30_000, () => (sim.stderr.includes('Uvicorn running on') ? true : undefined));
      expect(sim.stderr.indexOf('Load weight end.')).toBeLessThan(sim.stderr.indexOf('Uvicorn running on'));
      await sim.ready(30_000);
    } finally {
      await sim.stop();
    }
  });

  it('a taken port fails like uvicorn: [Errno 98] address already in use, exit 1', async () => {
    const holder = await startFakeServer((_body, res) => res.end());
    const port = Number(new URL(holder.baseUrl).port);
    try {
      const sim = await Sim.start(['--model-path', MODEL], {}, port);
      await sim.waitExit();
      expect(sim.exitCode).toBe(1);
      expect(sim.stderr).toContain(
        `[Errno 98] error while attempting to bind on address ('127.0.0.1', ${port}): address already in use`,
      );
    } finally {
      await holder.close();
    }
  });

  it('never-ready: uvicorn is up, model info answers, /health stays 503', async () => {
    const sim = await Sim.start(['--model-path', MODEL], { AERIE_SIM_FAULT: 'never-ready' });
    try {
      await until('the uvicorn line', 15_000, () => (sim.stderr.includes('Uvicorn running on') ? true : undefined));
      const end = Date.now() + 600;
      while (Date.now() < end) {
        expect(await sim.status('/health')).toBe(503);
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(await sim.status('/get_model_info')).toBe(200);
      expect(sim.stderr).not.toContain('fired up');
    } finally {
      expect(await sim.stop()).toBe(0);
    }
  });

  it('crash-first-decode: healthy, then the first real generation kills the server; one-shot via AERIE_SIM_FAULT_ONCE', async () => {
    const marker = path.join(scratch, 'crash-once');
    const env = { AERIE_SIM_FAULT: 'crash-first-decode', AERIE_SIM_FAULT_ONCE: marker };
    const args = [
      '--model-path',
      MODEL,
      '--speculative-algorithm',
      'EAGLE3',
      '--speculative-draft-model-path',
      drafter,
    ];
    const first = await Sim.start(args, env);
    try {
      await first.ready();
      const answer = await first
        .json('/generate', { text: 'first real request', sampling_params: { max_new_tokens: 8 } })
        .catch((e: Error) => e);
      expect(answer).toBeInstanceOf(Error);
      expect(await first.waitExit()).toBe(1);
      expect(first.stderr).toContain(
        "AttributeError: 'EAGLEWorkerV2' object has no attribute 'spec_disable_batch_threshold'",
      );
      expect(first.stderr).toContain('Scheduler hit an exception: Traceback (most recent call last):');
      await fs.access(marker);
    } finally {
      await first.stop();
    }
    const second = await Sim.start(args, env);
    try {
      await second.ready();
      const ok = await second.json('/generate', { text: 'first real request', sampling_params: { max_new_tokens: 8 } });
      expect(ok.status).toBe(200);
      expect(ok.body.meta_info.completion_tokens).toBe(8);
      expect(second.alive).toBe(true);
    } finally {
      expect(await second.stop()).toBe(0);
    }
  });
});
