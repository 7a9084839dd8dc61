/**
 * A running workflow's history names each activity it scheduled, and a worker that no longer
 * registers one of those names leaves the run stuck at that step. Moving an activity between
 * files must therefore keep every recorded name registered, each taking its one input object.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../../src/activities/index.js';
import { leaseActivities } from '../../src/activities/leases.js';
import type { HostPool } from '../../src/hosts/index.js';

const FIXTURES = fileURLToPath(new URL('../fixtures/histories/', import.meta.url));

interface HistoryJson {
  events: { activityTaskScheduledEventAttributes?: { activityType?: { name?: string } } }[];
}

function recordedActivityNames(): Set<string> {
  const names = new Set<string>();
  for (const f of readdirSync(FIXTURES).filter((f) => f.endsWith('.json.gz'))) {
    const history = JSON.parse(gunzipSync(readFileSync(FIXTURES + f)).toString('utf8')) as HistoryJson;
    for (const e of history.events) {
      const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
      if (name) names.add(name);
    }
  }
  return names;
}

describe('registered activity names', () => {
  // Building the activities only closes over the pool; no host is asked for until one runs.
  // As src/worker.ts registers them: the stage activities and, beside them, the GPU-lease ones.
  const registered = {
    ...createActivities({ hosts: {} as HostPool }),
    ...leaseActivities({ hosts: {} as HostPool }),
  } as Record<string, (...args: unknown[]) => unknown>;

  it('registers every activity a recorded history scheduled, each taking one input', () => {
    const recorded = [...recordedActivityNames()].sort();
    // The demo history alone schedules fifteen kinds; fewer means the fixtures were not read.
    expect(recorded.length).toBeGreaterThanOrEqual(15);
    for (const name of recorded) {
      expect(Object.keys(registered), name).toContain(name);
      expect(registered[name]!.length, name).toBe(1);
    }
  });

  it('registers extractOffline, which no recorded history reaches (the demo extracts with the patched server)', () => {
    expect(registered.extractOffline?.length).toBe(1);
  });
});
