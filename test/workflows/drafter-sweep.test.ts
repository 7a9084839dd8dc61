/**
 * The drafterSweep parent's decisions, in seconds: the real workflow code on a real Worker in
 * @temporalio/testing's local environment, against stub activities. The shared run stops after
 * its last stage and every variant reads its results instead of running them again, chaining
 * its ledger on their hash; a variant that fails leaves the others running; a shared run that
 * fails ends the sweep before any variant starts.
 */
import { WorkflowFailedError } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import type { LedgerRecord } from '../../src/ledger/record.js';
import type { Config } from '../../src/config/schema.js';
import type { StageName } from '../../src/shared.js';
import { drafterSweep, type SweepInput } from '../../src/workflows/index.js';
import { demoConfig } from '../support/demo-config.js';
import { failure, StubActivities, stubHash, untilCancelled } from '../support/stub-activities.js';
import { waitUntil } from '../support/temporal.js';
import { useWorkflowEnv } from '../support/workflow-env.js';

const w = useWorkflowEnv();

let sweeps = 0;

/** Stubs whose ledger is kept per run, as each run's ledger lives in its own run folder on the host. */
function stubs(gone: (runId: string, stage: StageName) => boolean = () => false): StubActivities {
  const ledgers = new Map<string, Map<StageName, LedgerRecord>>();
  const of = (runId: string) => ledgers.get(runId) ?? ledgers.set(runId, new Map()).get(runId)!;
  return new StubActivities()
    .on('checkLedger', ({ runId, stage, upstream }) => {
      const hash = stubHash(stage, upstream);
      const record = of(runId).get(stage);
      if (record && gone(runId, stage)) return { valid: false, inputsHash: hash, reason: 'an output is missing' };
      return record?.inputsHash === hash
        ? { valid: true, inputsHash: hash, reason: 'already done', record }
        : { valid: false, inputsHash: hash, reason: 'not done yet' };
    })
    .on('writeLedger', (i) => {
      const record: LedgerRecord = { ...i, outputs: [], finishedAt: 'stub', runId: i.runId };
      of(i.runId).set(i.stage, record);
      return record;
    });
}

function sweepOf(epochs: number[], until?: 'generate' | 'extract' | 'train'): SweepInput {
  const sweepId = `sweep${++sweeps}`;
  const config = (n: number): Config =>
    demoConfig('/stub/work', 30000, (c) => {
      (c.stages.train as { 'num-epochs': number })['num-epochs'] = n;
    });
  return {
    sweepId,
    configPath: 'test',
    ...(until ? { shared: { runId: `${sweepId}-shared`, until, config: config(epochs[0]!) } } : {}),
    variants: epochs.map((n, i) => ({ label: `num-epochs=${n}`, runId: `${sweepId}-v${i + 1}`, config: config(n) })),
  };
}

const runsOf = (s: StubActivities, name: string) =>
  s.calls.filter((c) => c.name === name).map((c) => (c.input as { runId: string }).runId);

async function runSweep(s: StubActivities, input: SweepInput) {
  return w.withWorker(s.activities(), (taskQueue) =>
    w.env.client.workflow.execute(drafterSweep, {
      taskQueue,
      workflowId: `aerie-sweep-${input.sweepId}`,
      args: [input],
    }),
  );
}

describe('drafterSweep', () => {
  it('runs generate and extract once, in the shared run; each variant trains from its results', async () => {
    const s = stubs();
    const input = sweepOf([1, 2], 'extract');
    const r = await runSweep(s, input);
    const id = input.sweepId;
    expect(r.shared).toMatchObject({ runId: `${id}-shared`, state: 'completed', until: 'extract' });
    expect(r.variants.map((v) => v.state)).toEqual(['completed', 'completed']);
    expect(runsOf(s, 'generateData')).toEqual([`${id}-shared`]);
    expect(runsOf(s, 'extractHiddenStates')).toEqual([`${id}-shared`]);
    expect(runsOf(s, 'trainDrafter').sort()).toEqual([`${id}-v1`, `${id}-v2`]);
    // The shared run measures nothing; each variant deploys and benchmarks its own drafter.
    expect(runsOf(s, 'acceptanceGate').sort()).toEqual([`${id}-v1`, `${id}-v2`]);
    // A variant's train record chains on the shared extract's hash, as if it had run extract itself.
    const trainChecks = s.calls.filter(
      (c) => c.name === 'checkLedger' && (c.input as { stage: string }).stage === 'train',
    );
    for (const c of trainChecks) {
      expect((c.input as { upstream: string[] }).upstream).toEqual([stubHash('extract', [stubHash('generate', [])])]);
    }
    for (const c of s.calls.filter((c) => c.name === 'trainDrafter')) {
      expect(c.input).toMatchObject({ dataPath: '/stub/data/train.jsonl' });
    }
    const board = r.results[0]!.stages.map((st) => `${st.stage}:${st.state}:${st.note ?? ''}`);
    expect(board.slice(1, 3)).toEqual([
      `generate:skipped:shared from run ${id}-shared`,
      `extract:skipped:shared from run ${id}-shared`,
    ]);
    expect(r.results[0]!.report).toBeDefined();
  });

  it("a variant runs a shared stage itself once the shared run's record no longer vouches for it", async () => {
    const input = sweepOf([1, 2], 'extract');
    const shared = `${input.sweepId}-shared`;
    // Once the shared run has recorded extract, its outputs are gone (the variants check after it).
    const s = stubs((runId, stage) => runId === shared && stage === 'extract');
    const r = await runSweep(s, input);
    expect(r.variants.map((v) => v.state)).toEqual(['completed', 'completed']);
    expect(runsOf(s, 'generateData')).toEqual([shared]);
    expect(runsOf(s, 'extractHiddenStates').sort()).toEqual([shared, `${input.sweepId}-v1`, `${input.sweepId}-v2`]);
    expect(r.results[0]!.stages.find((st) => st.stage === 'extract')?.state).toBe('done');
  });

  it('shares the drafter too when only deploy settings differ, and nothing without a shared run', async () => {
    const s = stubs();
    const input = sweepOf([2, 2], 'train');
    await runSweep(s, input);
    expect(runsOf(s, 'trainDrafter')).toEqual([`${input.sweepId}-shared`]);
    const none = stubs();
    const apart = sweepOf([1, 2]);
    const r = await runSweep(none, apart);
    expect(r.shared).toBeUndefined();
    expect(runsOf(none, 'generateData').sort()).toEqual([`${apart.sweepId}-v1`, `${apart.sweepId}-v2`]);
  });

  it('a variant that fails leaves the others to finish', async () => {
    const s = stubs().on('trainDrafter', (i) => {
      if (i.runId.endsWith('-v1')) throw failure('TrainerCrashed', 'the trainer crashed 3 times');
      return { drafterDir: '/stub/drafter', launches: 1, argv: ['train'], outputs: ['/stub/drafter'], note: 'ok' };
    });
    const r = await runSweep(s, sweepOf([1, 2], 'extract'));
    expect(r.variants.map((v) => v.state)).toEqual(['failed', 'completed']);
    expect(r.variants[0]!.error).toContain('the trainer crashed 3 times');
    expect(r.results[0]).toBeNull();
    expect(r.results[1]!.report).toBeDefined();
  });

  it('a shared run that fails ends the sweep before any variant starts', async () => {
    const s = stubs().on('generateData', () => {
      throw failure('DataIncomplete', 'only 2 of 4 samples came back');
    });
    const input = sweepOf([1, 2], 'extract');
    const err = await runSweep(s, input).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(WorkflowFailedError);
    expect(runsOf(s, 'preflight')).toEqual([`${input.sweepId}-shared`]);
  });

  it('cancelling the sweep cancels every variant, and no server is left live', async () => {
    let training = 0;
    const s = stubs().on('trainDrafter', () => untilCancelled(() => training++));
    const input = sweepOf([1, 2], 'extract');
    const err = await w.withWorker(s.activities(), async (taskQueue) => {
      const h = await w.env.client.workflow.start(drafterSweep, {
        taskQueue,
        workflowId: `aerie-sweep-${input.sweepId}`,
        args: [input],
      });
      // The stub leases grant at once: both variants train side by side.
      await waitUntil(async () => training === 2, 'both variants to be training', 30_000, 50);
      await h.cancel();
      return h.result().then(
        () => undefined,
        (e: unknown) => e,
      );
    });
    expect(err).toBeInstanceOf(WorkflowFailedError);
    for (const v of input.variants) {
      const d = await w.env.client.workflow.getHandle(v.runId).describe();
      expect(d.status.name).toBe('CANCELLED');
    }
    expect(s.liveServers()).toEqual([]);
  });
});
