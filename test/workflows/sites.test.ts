// hosts.<name>.task-queue: the activity options carry the queue only when the run's target host
// names one, so a run without it schedules exactly what recorded histories hold; the field refuses
// a name no worker could be started with, naming the field and the fix.
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { heartbeatingActivities, hostTaskQueue, shortActivity } from '../../src/workflows/activities.js';
import { configProblems } from '../support/config-problems.js';

const minimal = (host: string) => `
hosts:
  gpu: { kind: local, workdir: /srv/aerie${host} }
  other: { kind: local, workdir: /srv/other, task-queue: elsewhere }
target: { model-path: /models/llama, host: gpu }
stages:
  generate: { input: /data/prompts.jsonl }
  extract: { driver: specforge-offline }
  train: { draft-model-config: /cfg/draft.json }
`;

const problems = (text: string) => configProblems(text);

describe('activity options for a host with and without a task queue', () => {
  it('without a queue, no option names one and the short options are shortActivity itself', () => {
    const options = heartbeatingActivities(30_000);
    for (const [name, o] of Object.entries(options)) expect(o, name).not.toHaveProperty('taskQueue');
    expect(options.short).toEqual(shortActivity);
    // The heartbeating ones as recorded histories were scheduled with (the 30 s default).
    expect(options.longRunning).toEqual({
      startToCloseTimeout: '72h',
      heartbeatTimeout: 30_000,
      retry: { ...shortActivity.retry, maximumAttempts: 20 },
    });
  });

  it("with a queue, every option carries it and is otherwise the queue-less one's", () => {
    const plain = heartbeatingActivities(45_000);
    const routed = heartbeatingActivities(45_000, 'site-b');
    expect(Object.keys(routed)).toEqual(Object.keys(plain));
    for (const [name, o] of Object.entries(routed)) {
      expect(o, name).toEqual({ ...plain[name as keyof typeof plain], taskQueue: 'site-b' });
    }
  });

  it("reads the queue of the run's target host only", () => {
    expect(hostTaskQueue(parseConfigText(minimal(', task-queue: site-b'), 't.yaml', {}))).toBe('site-b');
    // Another host's queue is not the target's.
    expect(hostTaskQueue(parseConfigText(minimal(''), 't.yaml', {}))).toBeUndefined();
  });
});

describe('hosts.<name>.task-queue', () => {
  it('refuses a name with spaces, naming the field and the fix', () => {
    const [problem, ...rest] = problems(minimal(', task-queue: "gpu site b"'));
    expect(rest).toEqual([]);
    expect(problem).toMatch(/^hosts\.gpu\.task-queue: /);
    expect(problem).toContain('no spaces');
    expect(problem).toContain('Fix: rename the queue, and start the site worker with the same name');
  });

  it('accepts the names a site worker is started with', () => {
    for (const q of ['site-b', 'gpu.site_b', 'lab/rack-3', 'team@site:b']) {
      expect(problems(minimal(`, task-queue: "${q}"`)), q).toEqual([]);
    }
    expect(problems(minimal(', task-queue: ""'))).toHaveLength(1);
  });
});
