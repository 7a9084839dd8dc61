/**
 * Resume by id through the real thing: the pipeline on a Temporal dev server, a real
 * `aerie worker` process SIGKILLed half-way through the generate stage, a second worker that
 * picks the stage up. Every input id must appear exactly once across the outputs, malformed
 * lines must be in the rejects file with their line numbers, and ok + error + skipped +
 * rejected must equal the input.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { TASK_QUEUE } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { demoConfig } from '../support/demo-config.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';

// The suite's afterAll SIGKILLs the workers, then stops the servers they launched by their recorded process groups.
const suite = useTemporalSuite('aerie-resume-gen-');
const startWorker = (name: string) => suite.startWorkerProcess(name);

const SAMPLES = 200;

/** 200 good samples with five bad lines among them; returns the ids expected in the outputs. */
async function writeInput(
  path: string,
): Promise<{ ids: string[]; lines: number; bad: Record<number, RegExp>; skipped: string[] }> {
  const lines: string[] = [];
  const ids: string[] = [];
  const bad: Record<number, RegExp> = {};
  for (let i = 0; i < SAMPLES; i++) {
    const id = `q${i}`;
    ids.push(id);
    lines.push(
      i % 2
        ? JSON.stringify({
            id,
            conversations: [
              { from: 'human', value: `question ${i} about sorting` },
              { from: 'gpt', value: 'old' },
            ],
          })
        : JSON.stringify({
            id,
            conversations: [
              { role: 'user', content: `question ${i}: explain hashing` },
              { role: 'assistant', content: 'old' },
            ],
          }),
    );
    if (i === 20) (lines.push('{"id": "broken", "conversations": ['), (bad[lines.length] = /^bad JSON/));
    if (i === 60) (lines.push(JSON.stringify({ id: 'noconv' })), (bad[lines.length] = /^no conversations/));
    if (i === 100)
      (lines.push(JSON.stringify({ id: 'empty', conversations: [{ role: 'user', content: '  ' }] })),
        (bad[lines.length] = /empty user content/));
    if (i === 140)
      (lines.push(JSON.stringify({ id: 'q3', conversations: [{ role: 'user', content: 'again' }] })),
        (bad[lines.length] = /^duplicate id/));
  }
  lines.push(JSON.stringify({ id: 'sysonly', conversations: [{ role: 'system', content: 'no question here' }] }));
  ids.push('sysonly');
  await writeFile(path, lines.join('\n') + '\n');
  return { ids, lines: lines.length, bad, skipped: ['sysonly'] };
}

const jsonl = async (path: string) =>
  (await readFile(path, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);

async function shardRows(dir: string): Promise<number> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((n) =>
    /^(ok|error|skipped|rejected)-\d+\.jsonl$/.test(n),
  );
  let n = 0;
  for (const name of names) n += (await readFile(join(dir, name), 'utf8')).split('\n').filter(Boolean).length;
  return n;
}

describe('generate resumes by id after the worker is SIGKILLed half-way', () => {
  it('every id exactly once across the outputs, bad lines rejected by number, ok + error + skipped + rejected = input', async () => {
    const workdir = join(suite.work, 'host');
    const input = join(suite.work, 'input.jsonl');
    const expected = await writeInput(input);
    const config = demoConfig(workdir, await freePort(), (c) => {
      c.stages.generate.input = input;
      c.stages.generate.concurrency = 4;
      c.stages.generate['max-tokens'] = 24;
      c.stages.generate['shard-size'] = 8;
      c.server.env.AERIE_SIM_DECODE_SCALE = '1.5'; // a stage of ~20 s: time to kill it half-way
    });
    const runId = `resume-gen-${Date.now()}`;
    const handle = await suite.t.client.workflow.start(pipeline, {
      taskQueue: TASK_QUEUE,
      workflowId: runId,
      args: [{ runId, config, configPath: 'test' }],
    });
    await startWorker('worker-1');

    const shards = join(workdir, 'runs', runId, 'data', 'shards');
    const half = Math.ceil(expected.lines / 2);
    await waitUntil(
      async () => (await shardRows(shards)) >= half,
      `half of the ${expected.lines} rows in shards`,
      90_000,
      100,
    );
    suite.killWorkerProcess('worker-1'); // the fault: the worker's recorded group dies mid-stage
    const atKill = await shardRows(shards);
    expect(atKill).toBeLessThan(expected.lines);

    await startWorker('worker-2');
    const ledger = join(workdir, 'runs', runId, '.aerie', 'ledger', 'generate.json');
    await waitUntil(
      async () => (await readFile(ledger, 'utf8').catch(() => '')) !== '',
      'the generate stage to finish on the second worker',
      120_000,
    );
    await handle.cancel(); // the later stages are not what this test is about
    await handle.result().catch(() => undefined);

    const out = join(workdir, 'runs', runId, 'data');
    const ok = await jsonl(join(out, 'train.jsonl'));
    const errors = await jsonl(join(out, 'train_error.jsonl'));
    const skipped = await jsonl(join(out, 'train_skipped.jsonl'));
    const rejected = await jsonl(join(out, 'train_rejected.jsonl'));
    const seen = [...ok, ...errors, ...skipped].map((r) => r.id as string);
    expect(seen.slice().sort()).toEqual(expected.ids.slice().sort());
    expect(new Set(seen).size).toBe(seen.length);
    expect(skipped.map((r) => r.id)).toEqual(expected.skipped);
    expect(rejected.map((r) => r.line)).toEqual(Object.keys(expected.bad).map(Number));
    for (const r of rejected) expect(r.reason).toMatch(expected.bad[r.line as number]!);

    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as {
      counts: Record<string, number>;
    };
    const c = manifest.counts;
    expect(c.input).toBe(expected.lines);
    expect(c.ok + c.error + c.skipped + c.rejected).toBe(c.input);
    expect([c.ok, c.error, c.skipped, c.rejected]).toEqual([ok.length, errors.length, skipped.length, rejected.length]);
    // Nothing finished before the kill was redone: the shards hold each row once.
    expect(await shardRows(shards)).toBe(expected.lines);
    // Each output row is in input order.
    const order = new Map(expected.ids.map((id, i) => [id, i] as const));
    const okIdx = ok.map((r) => order.get(r.id as string)!);
    expect(okIdx).toEqual(okIdx.slice().sort((a, b) => a - b));

    // One scheduling of the stage, a second attempt after the kill.
    const history = await handle.fetchHistory();
    const typeById = new Map<string, string>();
    let scheduled = 0;
    let attempt = 0;
    for (const e of history.events ?? []) {
      const s = e.activityTaskScheduledEventAttributes;
      if (s) {
        typeById.set(String(e.eventId), s.activityType?.name ?? '');
        if (s.activityType?.name === 'generateData') scheduled++;
      }
      const st = e.activityTaskStartedEventAttributes;
      if (st && typeById.get(String(st.scheduledEventId)) === 'generateData') attempt = st.attempt ?? 0;
    }
    expect(scheduled).toBe(1);
    expect(attempt).toBeGreaterThanOrEqual(2);
    const record = JSON.parse(await readFile(ledger, 'utf8')) as { note: string };
    expect(record.note).toMatch(/from before a resume/);
  }, 240_000);
});
