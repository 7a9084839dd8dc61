/** `aerie report <run>` for runs that are not finished, have no report, or left only results.jsonl behind. */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderResultsJsonl } from '../../src/bench/report-files.js';
import { reportCommand } from '../../src/cli/report.js';
import { sweepInput } from '../bench/report-fixture.js';
import { useWorkdir } from '../support/workdir.js';

const tmp = useWorkdir('aerie-report-cli-');

function capture() {
  const out = { text: '', write: (s: string) => (out.text += s) };
  return out;
}

describe('aerie report', () => {
  it('renders the table from a run folder that holds only results.jsonl', async () => {
    const folder = join(tmp.path, 'only-jsonl');
    await mkdir(folder, { recursive: true });
    await writeFile(join(folder, 'results.jsonl'), renderResultsJsonl(sweepInput));
    const out = capture();
    expect(await reportCommand('r1', { folder, out, lookup: () => Promise.reject(new Error('not asked')) })).toBe(0);
    expect(out.text.split('\n')[0]).toBe('aerie run r1');
    expect(out.text.split('\n').filter((l) => /^\s+\d+\s/.test(l))).toHaveLength(8);
    expect(out.text).toContain('0.60×');
    expect(out.text).toContain(`results.jsonl  ${join(folder, 'results.jsonl')}`);
  });

  it('says when a run is still running (with its phase) or ended without a report', async () => {
    const running = capture();
    const phase = 'eagle3 level 2/8, concurrency 2 ▕██        ▏ 3/16 requests';
    expect(
      await reportCommand('r2', {
        folder: join(tmp.path, 'r2'),
        out: running,
        lookup: async () => ({ status: 'RUNNING', phase }),
      }),
    ).toBe(0);
    expect(running.text).toBe(`run r2 is running: ${phase}\nthe report is written when the benchmark stage finishes\n`);

    const failed = capture();
    expect(
      await reportCommand('r3', {
        folder: join(tmp.path, 'r3'),
        out: failed,
        lookup: async () => ({ status: 'FAILED' }),
      }),
    ).toBe(1);
    expect(failed.text).toBe('run r3 ended failed without a report\n');

    const noReport = capture();
    expect(
      await reportCommand('r4', {
        folder: join(tmp.path, 'r4'),
        out: noReport,
        lookup: async () => ({ status: 'COMPLETED', result: { runId: 'r4', stages: [] } }),
      }),
    ).toBe(1);
    expect(noReport.text).toBe('run r4 finished without a benchmark report\n');
  });
});
