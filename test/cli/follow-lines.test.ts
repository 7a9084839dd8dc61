/** The lines `aerie run` prints while it follows a run: never an empty phase, never a raw activity name. */
import { describe, expect, it } from 'vitest';
import { describeActivity } from '../../src/cli/phase.js';
import { fitWidth, phaseLine, phaseMemory, tableOf } from '../../src/cli/follow-run.js';
import { STAGES, type RunStatus, type StageStatus } from '../../src/shared.js';

function status(
  current: StageStatus['stage'] | undefined,
  stages: Partial<Record<StageStatus['stage'], Partial<StageStatus>>>,
): RunStatus {
  return {
    runId: 'r',
    label: 'l',
    current,
    stages: STAGES.map((stage) => ({ stage, state: 'pending', ...stages[stage] })),
  };
}

describe('phase lines (a log, not a terminal)', () => {
  it('says "starting" for a stage that has begun with no activity and no note yet', () => {
    expect(phaseLine(status('preflight', { preflight: { state: 'running' } }))).toBe('preflight: starting');
  });

  it('prints nothing before the first stage begins, and nothing for a stage that has just failed', () => {
    expect(phaseLine(status(undefined, {}))).toBeUndefined();
    expect(
      phaseLine(status('preflight', { preflight: { state: 'failed', note: 'preflight found 1 problem:\n  - x' } })),
    ).toBeUndefined();
  });

  it('prefers the running activity, then the stage note', () => {
    const s = status('generate', { generate: { state: 'running', note: 'regenerating' } });
    expect(phaseLine(s, 'regenerated 3/10')).toBe('generate: regenerated 3/10');
    expect(phaseLine(s)).toBe('generate: regenerating');
  });
});

describe('the phase between two activities', () => {
  it('keeps the last activity of the stage, says "starting" only before the first, and yields to a note', () => {
    const phase = phaseMemory();
    const extract = status('extract', { extract: { state: 'running' } });
    expect(phaseLine(extract, phase(extract, undefined))).toBe('extract: starting');
    expect(phaseLine(extract, phase(extract, 'server warming up 2 s'))).toBe('extract: server warming up 2 s');
    expect(phaseLine(extract, phase(extract, undefined))).toBe('extract: server warming up 2 s');
    const relaunching = status('extract', { extract: { state: 'running', note: 'relaunching' } });
    expect(phaseLine(relaunching, phase(relaunching, undefined))).toBe('extract: relaunching');
    const train = status('train', { extract: { state: 'done' }, train: { state: 'running' } });
    expect(phaseLine(train, phase(train, undefined))).toBe('train: starting');
  });
});

describe('the stage table', () => {
  it('shows the first line of a multi-line failure; the full reason is printed below it', () => {
    const table = tableOf(
      status('preflight', { preflight: { state: 'failed', note: 'preflight found 2 problems:\n  - a\n  - b' } }),
    );
    expect(table.split('\n')).toHaveLength(STAGES.length);
    expect(table).toMatch(/^ {2}✗ preflight +failed +preflight found 2 problems: …$/m);
  });

  it('says "starting" on a stage just entered, before its first activity or note', () => {
    const preflight = status('preflight', { preflight: { state: 'running' } });
    expect(tableOf(preflight, phaseMemory()(preflight, undefined))).toMatch(/^ {2}▶ preflight +running +starting$/m);
    expect(tableOf(preflight, phaseMemory()(preflight, 'checking'))).toMatch(/^ {2}▶ preflight +running +checking$/m);
  });
});

describe('the live table on a terminal', () => {
  it('cuts each line to the width, so a redraw leaves no wrapped tail behind', () => {
    const table = tableOf(
      status('generate', { preflight: { state: 'done', note: 'ok' }, generate: { state: 'running' } }),
      'x'.repeat(200),
    );
    const fitted = fitWidth(table, 80).split('\n');
    expect(fitted).toHaveLength(STAGES.length);
    for (const line of fitted) expect(line.length).toBeLessThan(80);
    expect(fitted[1]).toMatch(/x…$/);
    expect(fitWidth(table, undefined)).toBe(table);
  });
});

describe('activities with no progress of their own', () => {
  it('are described in words, not by their type name', () => {
    for (const type of [
      'generateData',
      'extractOffline',
      'extractHiddenStates',
      'preflight',
      'checkLedger',
      'writeLedger',
      'launchServer',
      'smokeTest',
      'acceptanceGate',
      'stopServer',
      'storedSweep',
      'writeReport',
    ]) {
      const text = describeActivity({ activityType: type, attempt: 1 });
      expect(text).not.toBe(type);
      expect(text.trim()).not.toBe('');
    }
    expect(describeActivity({ activityType: 'preflight', attempt: 1 })).toMatch(/^checking the target host/);
    expect(
      describeActivity({
        activityType: 'acceptanceGate',
        attempt: 1,
        details: { gate: 'greedy requests', done: 3, of: 8 },
      }),
    ).toBe('acceptance gate: greedy requests 3/8');
  });
});
