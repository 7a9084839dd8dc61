/**
 * Incident 4 on simulated GPUs: the simulator's nvidia-smi reports the GPU memory its servers
 * and trainers hold (AERIE_SIM_GPU_DIR, this file's own). A server aerie did not launch blocks
 * preflight on its GPU and is never signalled; with hosts.<name>.gpus the run uses other GPUs,
 * confines its launches to them, and every stop waits until its GPU memory is released.
 */
import type { ChildProcess } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runPreflight } from '../../src/activities/preflight.js';
import { AERIE_HOME } from '../../src/config/load.js';
import { TASK_QUEUE, type PipelineInput, type PipelineResult } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { run, useProcessGroups } from '../support/processes.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

const SIM = join(AERIE_HOME, 'bin', 'aerie-sim.mjs');
let foreign: ChildProcess | undefined;

async function nvidiaSmi(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const { code, stdout, stderr } = await run(process.execPath, [SIM, 'nvidia-smi', ...args]);
  return { code, stdout, stderr };
}

const suite = useTemporalSuite('aerie-simgpu-', {
  setup(work) {
    process.env.AERIE_SIM_GPU_DIR = join(work, 'gpus');
    process.env.AERIE_SIM_GPUS = '4';
  },
});

// Registered after the suite's, so its afterAll runs first: the foreign server (SIGKILLed by its pgid) goes before the dev server.
const groups = useProcessGroups();

describe('the simulator nvidia-smi', () => {
  it('answers the query mode like the driver: header and units unless asked otherwise, refuses unknown fields', async () => {
    const withHeader = await nvidiaSmi(['--query-gpu=index,name,memory.used,memory.total', '--format=csv']);
    expect(withHeader.code).toBe(0);
    expect(withHeader.stdout.split('\n').slice(0, 2)).toEqual([
      'index, name, memory.used [MiB], memory.total [MiB]',
      '0, NVIDIA H100 80GB HBM3, 4 MiB, 81559 MiB',
    ]);
    expect(withHeader.stdout.trim().split('\n')).toHaveLength(5);
    const apps = await nvidiaSmi(['--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader,nounits']);
    expect(apps).toEqual({ code: 0, stdout: '', stderr: '' });
    const bad = await nvidiaSmi(['--query-gpu=index,watts', '--format=csv']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toBe('Field "watts" is not a valid field to query.\n');
  });
});

describe('a run beside a server aerie did not start', () => {
  it('is refused while that server holds its GPU, then runs on other GPUs and waits for GPU release at every stop', async () => {
    // A colleague's server on GPU 0, in its own process group; aerie never launched it.
    const port = await freePort();
    foreign = groups.start(
      process.execPath,
      [SIM, 'sglang', '--model-path', join(AERIE_HOME, 'examples', 'models', 'sim-llama-8b'), '--port', String(port)],
      {
        stdio: 'ignore',
        env: { ...process.env, AERIE_SIM_TIME_SCALE: '0.01', CUDA_VISIBLE_DEVICES: '0' },
      },
    );
    await waitUntil(
      async () =>
        (
          await nvidiaSmi(['--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader,nounits'])
        ).stdout.includes(`${foreign!.pid}, `),
      'the foreign server on the GPUs',
      60_000,
      200,
    );

    const workdir = join(suite.work, 'host');
    const config = demoConfig(workdir, await freePort());
    const refused = await runPreflight(
      suite.hostAt('host', { nvidiaSmi: config.hosts.local!['nvidia-smi'] }),
      config,
      'refused',
    );
    expect(refused.problems).toEqual([
      expect.stringMatching(
        new RegExp(
          `^GPUs on local are in use by processes aerie did not start: pid ${foreign.pid} \\(\\d+ MiB on GPU 0\\)`,
        ),
      ),
    ]);

    config.hosts.local!.gpus = [2, 3];
    const runId = `simgpu-${Date.now()}`;
    const input: PipelineInput = { runId, config, configPath: 'test' };
    let seenOnOurGpu = false;
    const result = (await suite.t.withWorker(async () => {
      const handle = await suite.t.client.workflow.start(pipeline, {
        taskQueue: TASK_QUEUE,
        workflowId: runId,
        args: [input],
      });
      // The run's first server shows up on GPU 2 (CUDA_VISIBLE_DEVICES=2,3, tp 1), never on GPU 0.
      const gpu2 = (await nvidiaSmi(['--query-gpu=index,uuid', '--format=csv,noheader'])).stdout
        .split('\n')[2]!
        .split(', ')[1]!;
      await waitUntil(
        async () => {
          const apps = (
            await nvidiaSmi(['--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader,nounits'])
          ).stdout;
          return (seenOnOurGpu = apps.includes(`, ${gpu2}, `));
        },
        'a run server on GPU 2',
        120_000,
        100,
      );
      return handle.result();
    })) as PipelineResult;
    expect(seenOnOurGpu).toBe(true);
    expect(result.stages.every((s) => s.state === 'done')).toBe(true);

    // Every stopServer saw its server's GPU memory go, and counted the foreign server.
    const history = await suite.t.client.workflow.getHandle(runId).fetchHistory();
    const scheduled = new Map<string, string>();
    const stops: { gpuReleased: boolean | null; foreignGpuProcesses: number }[] = [];
    for (const e of history.events ?? []) {
      const s = e.activityTaskScheduledEventAttributes;
      if (s) scheduled.set(String(e.eventId), s.activityType?.name ?? '');
      const c = e.activityTaskCompletedEventAttributes;
      if (c && scheduled.get(String(c.scheduledEventId)) === 'stopServer') {
        stops.push(JSON.parse(Buffer.from(c.result!.payloads![0]!.data!).toString('utf8')) as (typeof stops)[number]);
      }
    }
    // One stop per model server the run launched: generate and deploy (prepare_hidden_states loads the target itself).
    const servers = (await readdir(join(workdir, '.aerie', 'procs'))).filter(
      (f) => f.startsWith(`${runId}.server-`) && f.endsWith('.json'),
    );
    expect(servers.length).toBeGreaterThanOrEqual(2);
    expect(stops.length).toBe(servers.length);
    for (const s of stops) expect(s).toMatchObject({ gpuReleased: true, foreignGpuProcesses: 1 });
    // The colleague's server was never signalled.
    expect(foreign.exitCode).toBeNull();
    expect(foreign.signalCode).toBeNull();
  }, 400_000);
});
