/**
 * The capture's advice when a prefill arrives without states names the flags that turn cuda
 * graphs off on the server's own release: each release's real parser must accept them cleanly
 * (0.5.23 has no --disable-piecewise-cuda-graph and deprecates --disable-cuda-graph).
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AERIE_HOME } from '../../src/config/load.js';
import { runSync } from '../support/processes.js';
import { judge } from './sglang-lines.js';

function advice(version: string): string[] {
  const res = runSync(
    'python3',
    [
      '-c',
      `import aerie_hs.sglang_hook as m\nm._state["version"] = ${JSON.stringify(version)}\nprint(m._no_graph_flags())`,
    ],
    { cwd: join(AERIE_HOME, 'py') },
  );
  expect(res.code, res.stderr).toBe(0);
  return res.stdout.trim().split(/\s+/);
}

describe("the capture's no-cuda-graph advice", () => {
  for (const version of ['0.5.12', '0.5.23'] as const) {
    it(`is accepted by SGLang ${version}'s parser without a deprecation warning`, () => {
      const flags = advice(version);
      const [verdict] = judge(version, [['--model-path', '/m', ...flags]]).verdicts;
      expect(verdict!.ok, verdict!.stderr).toBe(true);
      expect(verdict!.warnings).toEqual([]);
    });
  }
});
