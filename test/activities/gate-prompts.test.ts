// The acceptance gate measures on held-out prompts where the generate input keeps some, and may be
// held to another run's recorded gate (issue 16 item 5).
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  FIXED_GATE_PROMPTS,
  GateBaselineError,
  gateFloor,
  gatePrompts,
  recordedGate,
  type GateRecord,
} from '../../src/activities/gate-prompts.js';
import { runPaths } from '../../src/activities/context.js';
import { demoConfig } from '../support/demo-config.js';
import { useLocalHost } from '../support/local-host.js';

const fixture = useLocalHost('aerie-gate-');

const conv = (text: string) => JSON.stringify({ conversations: [{ role: 'user', content: text }] });

describe('acceptance gate prompts', () => {
  it('takes the first user turns after num-samples, never a trained-on row', async () => {
    const input = join(fixture.dir, 'input.jsonl');
    await writeFile(input, ['trained 1', 'trained 2', 'held 1', 'held 2', 'held 3'].map(conv).join('\n') + '\n');
    const config = demoConfig(fixture.dir, 1, (c) => {
      c.stages.generate.input = input;
      c.stages.generate['num-samples'] = 2;
      c.stages.deploy['acceptance-requests'] = 2;
    });
    const p = await gatePrompts(fixture.host, config);
    expect(p).toEqual({ kind: 'held-out', prompts: ['held 1', 'held 2'], source: `${input} after row 2` });
  });

  it('falls back to the fixed prompts and says why when nothing is held out', async () => {
    const input = join(fixture.dir, 'all-trained.jsonl');
    await writeFile(input, ['a', 'b'].map(conv).join('\n') + '\n');
    const unset = demoConfig(fixture.dir, 1, (c) => {
      c.stages.generate.input = input;
      c.stages.generate['num-samples'] = undefined;
    });
    expect(await gatePrompts(fixture.host, unset)).toMatchObject({
      kind: 'fixed',
      prompts: FIXED_GATE_PROMPTS,
      source: expect.stringContaining('num-samples is unset'),
    });
    const used = demoConfig(fixture.dir, 1, (c) => {
      c.stages.generate.input = input;
      c.stages.generate['num-samples'] = 2;
    });
    expect((await gatePrompts(fixture.host, used)).source).toContain(`no row of ${input} after the first 2`);
  });
});

describe('acceptance gate bar', () => {
  it('is the threshold, raised to the other run less the margin only when that is higher', () => {
    expect(gateFloor(1.3, undefined)).toEqual({ floor: 1.3, from: 'stages.deploy.acceptance-threshold 1.3' });
    const raised = gateFloor(1.3, { run: 'r0', margin: 0.1, acceptLength: 2.5 });
    expect(raised.floor).toBeCloseTo(2.4, 12);
    expect(raised.from).toBe("run r0's gate 2.50 − 0.1");
    expect(gateFloor(1.3, { run: 'r0', margin: 0.5, acceptLength: 1.6 }).floor).toBe(1.3);
  });

  it("reads the other run's gate from its benchmark ledger record, with a fix when it cannot", async () => {
    const host = fixture.host;
    await expect(recordedGate(host, 'never-ran')).rejects.toThrow(
      /stages\.deploy\.acceptance-versus\.run: run never-ran has no finished benchmark on host local/,
    );
    const ledger = runPaths(host, 'old').ledger;
    await mkdir(ledger, { recursive: true });
    const record = (result: unknown) =>
      JSON.stringify({
        stage: 'benchmark',
        inputsHash: 'h',
        outputs: [],
        result,
        note: '',
        finishedAt: '',
        runId: 'old',
      });
    await writeFile(join(ledger, 'benchmark.json'), record({ table: '' }));
    await expect(recordedGate(host, 'old')).rejects.toBeInstanceOf(GateBaselineError);
    await expect(recordedGate(host, 'old')).rejects.toThrow(/keeps no acceptance gate figure/);
    const gate: GateRecord = {
      acceptLength: 2.2,
      perRequest: [2.1, 2.3],
      prompts: { kind: 'held-out', source: 'in.jsonl after row 10' },
      floor: 1.3,
      floorFrom: 'stages.deploy.acceptance-threshold 1.3',
    };
    await writeFile(join(ledger, 'benchmark.json'), record({ table: '', gate }));
    expect(await recordedGate(host, 'old')).toEqual(gate);
  });
});
