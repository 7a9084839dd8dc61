/**
 * The whole pipeline through a real Temporal dev server, real worker, real processes
 * (the simulator standing in for SGLang and SpecForge), real files.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { PassThrough } from 'node:stream';
import { describe, expect, it, vi } from 'vitest';
import { statusCommand } from '../../src/cli/status.js';
import { parseJsonLine } from '../../src/bench/python-json.js';
import { TASK_QUEUE, type GateRecord, type PipelineInput, type PipelineResult } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { ALL_STAGES_DONE, stageStates } from '../support/stages.js';
import { useTemporalSuite } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-e2e-');

async function launchRecords(workdir: string): Promise<string[]> {
  const files = await readdir(join(workdir, '.aerie', 'procs')).catch(() => [] as string[]);
  return files
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -5))
    .sort();
}

describe('pipeline end to end on the simulator', () => {
  it('runs every stage, writes a report, and a second run of the same id redoes nothing', async () => {
    const workdir = join(suite.work, 'full');
    const config = demoConfig(workdir, await freePort());
    const runId = `e2e-full-${Date.now()}`;
    const input: PipelineInput = { runId, config, configPath: 'test' };
    const result = (await suite.t.withWorker(() =>
      suite.t.client.workflow.execute(pipeline, { taskQueue: TASK_QUEUE, workflowId: runId, args: [input] }),
    )) as PipelineResult;

    expect(stageStates(result)).toEqual(ALL_STAGES_DONE);
    expect(result.report?.table).toMatch(/speedup/i);
    const results = (await readFile(join(workdir, 'runs', runId, 'bench', 'results.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => parseJsonLine(l) as Record<string, any>);
    expect(results).toHaveLength(6);
    const eagle = results.filter((r) => r.aerie_variant === 'eagle3');
    expect(eagle.map((r) => r.max_concurrency)).toEqual([1, 4, 16]);
    // Per-request accept length: the server's running average may be null on a short level.
    for (const r of eagle) expect(r.mean_accept_length_per_request ?? r.accept_length).toBeGreaterThan(1.3);
    const launchesAfterFirst = await launchRecords(workdir);
    expect(launchesAfterFirst).toEqual(
      // The extraction server carries aerie's capture; the CLI trains, then exports.
      [
        `${runId}.server-generate.0`,
        `${runId}.server-extract.0`,
        `${runId}.train.0`,
        `${runId}.train-export.0`,
        `${runId}.server-deploy.0`,
      ].sort(),
    );

    // aerie status on the finished run: the table, the report and what each stage cost in GPU-hours.
    vi.stubEnv('TEMPORAL_ADDRESS', suite.t.server.address);
    const shown = new PassThrough();
    let status = '';
    shown.on('data', (b: Buffer) => (status += b.toString('utf8')));
    expect(await statusCommand(runId, shown)).toBe(0);
    vi.unstubAllEnvs();
    expect(status).toContain(`run ${runId}: completed`);
    expect(status).toMatch(/^GPU-hours: generate [\d.]+ GPU-h, extract [\d.]+ GPU-h, .*; total [\d.]+ GPU-h$/m);

    // Same run id again (what `aerie resume` does after a failure): every stage is a ledger hit.
    const again = (await suite.t.withWorker(() =>
      suite.t.client.workflow.execute(pipeline, { taskQueue: TASK_QUEUE, workflowId: runId, args: [input] }),
    )) as PipelineResult;
    expect(again.stages.map((s) => s.state)).toEqual(['done', 'skipped', 'skipped', 'skipped', 'skipped', 'skipped']);
    expect(await launchRecords(workdir)).toEqual(launchesAfterFirst);

    // The acceptance gate is kept in the benchmark's ledger record; the demo holds no input row
    // out (no num-samples), so the gate said it measured on the fixed prompts.
    const ledgerPath = join(workdir, 'runs', runId, '.aerie', 'ledger', 'benchmark.json');
    const record = JSON.parse(await readFile(ledgerPath, 'utf8')) as { result: { gate?: GateRecord } };
    const gate = record.result.gate!;
    expect(gate.prompts.kind).toBe('fixed');
    expect(gate.prompts.source).toMatch(/^four fixed prompts \(stages\.generate\.num-samples is unset/);
    expect(gate.acceptLength).toBeGreaterThan(1.3);
    expect(result.report?.gate).toEqual(gate);

    // acceptance-versus: a run held to a recorded gate it cannot reach is refused at the gate,
    // naming the bar and where it came from (here the run's own earlier record, raised out of reach).
    record.result.gate = { ...gate, acceptLength: 99 };
    await writeFile(ledgerPath, JSON.stringify(record));
    const versus = demoConfig(workdir, config.server.port, (c) => {
      c.stages.deploy['acceptance-versus'] = { run: runId, margin: 0.05 };
    });
    const refused = await suite.t
      .withWorker(() =>
        suite.t.client.workflow.execute(pipeline, {
          taskQueue: TASK_QUEUE,
          workflowId: runId,
          args: [{ ...input, config: versus }],
        }),
      )
      .catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(WorkflowFailedError);
    const chain: string[] = [];
    for (let e = refused as { message?: string; cause?: unknown } | undefined; e; e = e.cause as typeof e)
      chain.push(e.message ?? '');
    expect(chain.join('\n')).toContain(`is below 98.95`);
    expect(chain.join('\n')).toContain(`(the bar is run ${runId}'s gate 99.00 − 0.05)`);
  }, 420_000);

  it('extracts with stock SGLang in two launches (aux, then final) and trains on the files', async () => {
    const workdir = join(suite.work, 'stock');
    const config = demoConfig(workdir, await freePort(), (c) => {
      const e = c.stages.extract;
      if (e.driver !== 'patched-server') throw new Error('the demo extracts with patched-server');
      const { 'dump-dir': _ram, ...rest } = e;
      c.stages.extract = { ...rest, driver: 'stock-server' };
      c.stages.benchmark.concurrencies = [1];
    });
    const runId = `e2e-stock-${Date.now()}`;
    const input: PipelineInput = { runId, config, configPath: 'test' };
    const result = (await suite.t.withWorker(() =>
      suite.t.client.workflow.execute(pipeline, { taskQueue: TASK_QUEUE, workflowId: runId, args: [input] }),
    )) as PipelineResult;
    expect(stageStates(result)).toEqual(ALL_STAGES_DONE);
    expect(result.stages.find((s) => s.stage === 'extract')?.note).toMatch(
      /^96 of 96 samples, .* \(stock SGLang, two passes\).*self-check: 32 samples/,
    );
    const launches = await launchRecords(workdir);
    expect(launches.filter((l) => l.includes('server-extract'))).toEqual([
      `${runId}.server-extract.0`,
      `${runId}.server-extract.1`,
    ]);
    const argv = async (l: string) =>
      (JSON.parse(await readFile(join(workdir, '.aerie', 'procs', `${l}.json`), 'utf8')) as { argv: string[] }).argv;
    expect(await argv(`${runId}.server-extract.0`)).toContain('--enable-return-aux-hidden-states');
    expect(await argv(`${runId}.server-extract.1`)).toContain('--enable-return-hidden-states');
    expect((await readdir(join(workdir, 'runs', runId, 'hidden_states', 'rows_0-64'))).length).toBe(64);
  }, 300_000);

  it('refuses EAGLE with an EAGLE-3 drafter before any server starts', async () => {
    const workdir = join(suite.work, 'eagle');
    const config = demoConfig(workdir, await freePort(), (c) => {
      c.stages.deploy['speculative-algorithm'] = 'EAGLE';
      // A drafter given explicitly passes config validation; preflight reads its config.json.
      c.stages.deploy['draft-model-path'] = join(process.cwd(), 'test', 'fixtures', 'eagle3-drafter');
    });
    const runId = `e2e-eagle-${Date.now()}`;
    const err = await suite.t.withWorker(() =>
      suite.t.client.workflow
        .execute(pipeline, { taskQueue: TASK_QUEUE, workflowId: runId, args: [{ runId, config, configPath: 'test' }] })
        .then(
          () => undefined,
          (e: unknown) => e,
        ),
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    const message = String((err as Error & { cause?: Error }).cause?.message);
    expect(message).toMatch(/preflight failed/);
    expect(message).toMatch(/EAGLE/);
    expect(message).toMatch(/EAGLE3/);
    expect(message).toMatch(/LlamaForCausalLMEagle3/);
    expect(await launchRecords(workdir)).toEqual([]);
  }, 120_000);
});
