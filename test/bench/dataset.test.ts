import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  benchServingDatasetName,
  DatasetError,
  largestLevel,
  levelPrompts,
  loadPromptPool,
  readFirstUserTurns,
} from '../../src/bench/dataset.js';
import { demoConfig } from '../support/demo-config.js';
import { useLocalHost } from '../support/local-host.js';

const local = useLocalHost('aerie-dataset-');
const row = (i: number) =>
  JSON.stringify({
    id: `r${i}`,
    conversations: [
      { role: 'user', content: `question ${i}` },
      { role: 'assistant', content: 'a' },
    ],
  });

beforeAll(async () => {
  const dir = local.dir;
  // 10 usable rows with a blank line, a broken line and a row without a user turn mixed in.
  const lines = [
    row(0),
    row(1),
    '',
    row(2),
    'not json',
    row(3),
    JSON.stringify({ conversations: [{ role: 'assistant', content: 'x' }] }),
    row(4),
    row(5),
    row(6),
    row(7),
    row(8),
    row(9),
  ];
  await writeFile(join(dir, 'prompts.jsonl'), lines.join('\n') + '\n');
  await writeFile(
    join(dir, 'sharegpt.json'),
    JSON.stringify([
      {
        conversations: [
          { from: 'human', value: 'h0' },
          { from: 'gpt', value: 'g' },
        ],
      },
      { conversations: [{ from: 'human', value: 'h1' }] },
    ]),
  );
});

const config = (tweak: Parameters<typeof demoConfig>[2]) => demoConfig(local.dir, 30000, tweak);

describe('prompt pools', () => {
  it('held-out: the first user turns of input rows after the first num-samples non-blank rows', async () => {
    const c = config((c) => {
      c.stages.generate.input = join(local.dir, 'prompts.jsonl');
      c.stages.generate['num-samples'] = 4; // rows 0, 1, 2 and 'not json'
      c.stages.benchmark.dataset = 'held-out';
    });
    const pool = await loadPromptPool(local.host, c);
    expect(pool.kind).toBe('held-out');
    expect(pool.prompts).toEqual([
      'question 3',
      'question 4',
      'question 5',
      'question 6',
      'question 7',
      'question 8',
      'question 9',
    ]);
    expect(benchServingDatasetName(pool.kind)).toBe('sharegpt');
    // a level bigger than the pool cycles through it in order
    expect(levelPrompts(pool, 9, 64, 1)).toEqual([...pool.prompts, 'question 3', 'question 4']);
  });

  it('held-out refuses a config where every input row was trained on, or none is left', async () => {
    const all = config((c) => {
      c.stages.generate.input = join(local.dir, 'prompts.jsonl');
      delete c.stages.generate['num-samples'];
      c.stages.benchmark.dataset = 'held-out';
    });
    await expect(loadPromptPool(local.host, all)).rejects.toThrow(/num-samples/);
    const none = config((c) => {
      c.stages.generate.input = join(local.dir, 'prompts.jsonl');
      c.stages.generate['num-samples'] = 100;
      c.stages.benchmark.dataset = 'held-out';
    });
    await expect(loadPromptPool(local.host, none)).rejects.toBeInstanceOf(DatasetError);
  });

  it('file: JSONL or a ShareGPT .json array, reading only as many rows as the largest level needs', async () => {
    const c = config((c) => {
      c.stages.benchmark.dataset = 'file';
      c.stages.benchmark['dataset-path'] = join(local.dir, 'sharegpt.json');
    });
    expect((await loadPromptPool(local.host, c)).prompts).toEqual(['h0', 'h1']);
    expect(await readFirstUserTurns(local.host, join(local.dir, 'prompts.jsonl'), 0, 3)).toEqual([
      'question 0',
      'question 1',
      'question 2',
    ]);
    await expect(readFirstUserTurns(local.host, join(local.dir, 'missing.jsonl'), 0, 3)).rejects.toThrow(
      /does not exist/,
    );
  });

  it('random: seeded word prompts, identical for both variants of a level', async () => {
    const c = config((c) => (c.stages.benchmark.dataset = 'random'));
    const pool = await loadPromptPool(local.host, c);
    expect(pool.kind).toBe('random');
    const a = levelPrompts(pool, 5, 12, 7);
    expect(a).toEqual(levelPrompts(pool, 5, 12, 7));
    expect(a.every((p) => p.split(' ').length === 12)).toBe(true);
    expect(largestLevel({ ...c.stages.benchmark, concurrencies: [1, 250] })).toBe(250);
  });
});
