import { describe, expect, it } from 'vitest';
import { renderStageMarkdown, renderStageTable, StageBoard } from '../../src/workflows/status.js';
import { describeActivity } from '../../src/cli/phase.js';

describe('stage board', () => {
  it('tracks stages and renders the Web UI markdown table', () => {
    const b = new StageBoard('demo-1', 'demo');
    b.set('preflight', 'done', 'host local reachable', '2026-01-01T00:00:00Z');
    b.set('generate', 'running', 'regenerating', '2026-01-01T00:00:01Z');
    const s = b.snapshot();
    expect(s.current).toBe('generate');
    expect(s.stages[0]).toEqual({
      stage: 'preflight',
      state: 'done',
      note: 'host local reachable',
      finishedAt: '2026-01-01T00:00:00Z',
    });
    expect(renderStageMarkdown(s)).toBe(
      [
        '**aerie run** `demo-1` (demo)',
        '',
        '| stage | state | note |',
        '|---|---|---|',
        '| ✓ preflight | done | host local reachable |',
        '| ▶ generate | running | regenerating |',
        '| · extract | pending |  |',
        '| · train | pending |  |',
        '| · deploy | pending |  |',
        '| · benchmark | pending |  |',
      ].join('\n'),
    );
  });

  it('shows the live phase on the running stage in the terminal table', () => {
    const b = new StageBoard('r', 'l');
    b.set('preflight', 'skipped', 'a|b');
    b.set('generate', 'running', 'note');
    const t = renderStageTable(b.snapshot(), 'regenerated 3/10');
    expect(t.split('\n')[0]).toBe('  ↷ preflight  skipped  a|b');
    expect(t.split('\n')[1]).toBe('  ▶ generate   running  regenerated 3/10');
    expect(renderStageMarkdown(b.snapshot())).toContain('a\\|b');
  });

  it('describes heartbeats in researcher words', () => {
    expect(
      describeActivity({
        activityType: 'awaitServerReady',
        attempt: 1,
        details: { phase: 'loading weights', elapsedMs: 12_400, lastHttp: 503 },
      }),
    ).toBe('server loading weights 12 s, HTTP 503');
    expect(
      describeActivity({
        activityType: 'trainDrafter',
        attempt: 2,
        details: { epoch: 1, totalEpochs: 2, step: 40, loss: 2.3141 },
        lastFailure: 'heartbeat timeout',
      }),
    ).toBe('training epoch 1/2 step 40 loss 2.314 [attempt 2: heartbeat timeout]');
    expect(
      describeActivity({ activityType: 'generateData', attempt: 1, details: { done: 5, total: 96, rate: 2.5 } }),
    ).toBe('regenerated 5/96 (2.5/s)');
    expect(
      describeActivity({
        activityType: 'generatePoolBatch',
        attempt: 1,
        details: { done: 40, total: 128, rate: 12.5, batch: 3, server: 'gpu-b:30000' },
      }),
    ).toBe('batch 3 on gpu-b:30000: 40/128 (12.5/s)');
  });
});
