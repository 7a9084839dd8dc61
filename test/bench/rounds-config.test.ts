// stages.benchmark.rounds: the default, and errors that name the field and the fix.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { benchRounds } from '../../src/activities/benchmark.js';

const base = await readFile('examples/demo.yaml', 'utf8');
const env = { ...process.env, AERIE_HOME: process.cwd() };
const withBenchmark = (extra: string): string => base.replace('  benchmark:\n', `  benchmark:\n${extra}`);

describe('stages.benchmark.rounds', () => {
  it('defaults to 3 rounds per level', () => {
    const c = parseConfigText(withBenchmark(''), 'demo.yaml', env);
    expect(c.stages.benchmark.rounds).toBe(3);
    expect(benchRounds(c)).toBe(3);
    expect(benchRounds(parseConfigText(withBenchmark('    rounds: 5\n'), 'demo.yaml', env))).toBe(5);
  });

  it('refuses 0 and a fraction, naming the field and what to set', () => {
    expect(() => parseConfigText(withBenchmark('    rounds: 0\n'), 'demo.yaml', env)).toThrow(
      /stages\.benchmark\.rounds.*at least 1/s,
    );
    expect(() => parseConfigText(withBenchmark('    rounds: 2.5\n'), 'demo.yaml', env)).toThrow(
      /stages\.benchmark\.rounds.*whole number/s,
    );
  });
});
