/**
 * What the SGLang judges share: every SGLang launch line aerie renders, with the releases each is
 * launched on, and a call into a release's own parser (scripts/real/sglang_argparse.py in
 * .venv-sglang-<release>, made by scripts/setup-sglang.sh). Used by sglang-argparse.test.ts
 * (the real parsers accept aerie's lines) and sim-argparse-judge.test.ts (the simulator parses
 * as they do).
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { planRun } from '../../src/cli/plan.js';
import { AERIE_HOME, loadConfigFile } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import {
  CAPTURE_SGLANG_VERSIONS,
  renderServerArgv,
  type ServerLaunchSpec,
  type SpeculativeSpec,
} from '../../src/sglang/launch-argv.js';
import { baseServerSpec } from '../../src/stages/launch-specs.js';
import { runSync } from '../support/processes.js';

export const VERSIONS = ['0.5.4', '0.5.9', '0.5.12', '0.5.23'] as const;
export type Version = (typeof VERSIONS)[number];

export interface Verdict {
  ok: boolean;
  exit: number;
  error: string | null;
  stderr: string;
  warnings: string[];
  standins_touched: string[];
  /** 0.5.23: the message of the model-independent validation step that refused the line. */
  validation_error: string | null;
  /** argparse's whole `<prog>: error: <message>` line, and the prog its usage line names. */
  error_line: string | null;
  usage_prog: string | null;
  /** An exception other than argparse's exit that ended the parse (`Type: message`). */
  exception: string | null;
}
export interface Judged {
  sglang: string;
  standins: string[];
  verdicts: Verdict[];
  watch_self_test?: string[];
  /** Every option the release's parser declares (sglang_argparse.py _inventory). */
  inventory?: Record<string, unknown>[];
}

export function python(version: Version): string {
  const py = join(AERIE_HOME, `.venv-sglang-${version}`, 'bin', 'python');
  if (!existsSync(py)) {
    throw new Error(
      `${py} is missing: run \`bash scripts/setup-sglang.sh\` (it installs SGLang ${version}'s PyPI wheel, no deps, into .venv-sglang-${version})`,
    );
  }
  // setup-sglang.sh writes the marker last: a venv without it is half-built.
  if (!existsSync(join(AERIE_HOME, `.venv-sglang-${version}`, '.aerie-pins'))) {
    throw new Error(
      `.venv-sglang-${version} is incomplete (no .aerie-pins): run \`bash scripts/setup-sglang.sh ${version}\``,
    );
  }
  return py;
}

export function judge(version: Version, argvs: string[][], watchSelfTest?: string, inventory = false): Judged {
  const res = runSync(python(version), [join(AERIE_HOME, 'scripts', 'real', 'sglang_argparse.py')], {
    input: JSON.stringify({
      argvs,
      ...(watchSelfTest ? { watch_self_test: watchSelfTest } : {}),
      ...(inventory ? { inventory: true } : {}),
    }),
  });
  if (res.code !== 0)
    throw new Error(`sglang_argparse.py (SGLang ${version}) exited ${res.code}: ${res.stdout}${res.stderr}`);
  const out = JSON.parse(res.stdout) as Judged;
  expect(out.sglang).toBe(version);
  expect(out.verdicts).toHaveLength(argvs.length);
  return out;
}

/** What follows `python -m sglang.launch_server`: aerie renders --model-path first (renderServerArgv). */
export function flags(argv: string[]): string[] {
  const i = argv.indexOf('--model-path');
  if (i < 0) throw new Error(`no --model-path in ${argv.join(' ')}`);
  return argv.slice(i);
}

export interface Case {
  name: string;
  argv: string[];
  /** The releases this line is launched on. */
  versions: readonly Version[];
}

const env = { ...process.env, AERIE_HOME, HF_TOKEN: process.env.HF_TOKEN ?? 'unused-by-plan' };

async function examples(): Promise<{ name: string; config: Config }[]> {
  const dir = join(AERIE_HOME, 'examples');
  const files = readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort();
  const all = await Promise.all(
    files.map(async (f) => ({ name: `examples/${f}`, config: await loadConfigFile(join(dir, f), env) })),
  );
  // vLLM's lines are judged by vLLM's own parser (test/real-vllm/argparse.test.ts).
  return all.filter((e) => e.config.server.engine === 'sglang');
}

const DEPLOY_VARIANTS: [string, SpeculativeSpec][] = [
  [
    'EAGLE3 3/1/4',
    { algorithm: 'EAGLE3', draftModelPath: '/r/train/drafter', numSteps: 3, eagleTopk: 1, numDraftTokens: 4 },
  ],
  [
    'EAGLE3 5/8/32',
    { algorithm: 'EAGLE3', draftModelPath: '/r/train/drafter', numSteps: 5, eagleTopk: 8, numDraftTokens: 32 },
  ],
  ['EAGLE3, SGLang picks the parameters', { algorithm: 'EAGLE3', draftModelPath: '/r/train/drafter' }],
  ['EAGLE', { algorithm: 'EAGLE', draftModelPath: '/r/train/drafter', numSteps: 3, eagleTopk: 1, numDraftTokens: 4 }],
  ['NEXTN without a draft path', { algorithm: 'NEXTN', numSteps: 1, eagleTopk: 1, numDraftTokens: 2 }],
  [
    'STANDALONE',
    { algorithm: 'STANDALONE', draftModelPath: '/models/small', numSteps: 3, eagleTopk: 1, numDraftTokens: 4 },
  ],
  ['NGRAM', { algorithm: 'NGRAM', numDraftTokens: 8 }],
];

/** Every SGLang launch aerie renders, with the releases each is for. */
export async function cases(): Promise<Case[]> {
  const out: Case[] = [];
  for (const { name, config } of await examples()) {
    // The plan as written, and with the release pinned to each the capture supports: the
    // extraction line differs per release, the others must parse on every release.
    const pins = ['as written', ...CAPTURE_SGLANG_VERSIONS] as const;
    for (const pin of pins) {
      const c: Config = structuredClone(config);
      if (pin !== 'as written') c.server['sglang-version'] = pin;
      for (const step of planRun(c, 'r1')) {
        if (!step.step.startsWith('launch ') || !step.argv) continue;
        const capture = step.stage === 'extract';
        // The plan shows 0.5.23's capture line for `auto` (plan.ts serverStep); a pinned plan renders the pin's.
        const shownFor: Version =
          pin === 'as written' ? (c.server['sglang-version'] === '0.5.12' ? '0.5.12' : '0.5.23') : pin;
        const driver = c.stages.extract.driver;
        const versions: readonly Version[] = !capture ? VERSIONS : driver === 'stock-server' ? ['0.5.23'] : [shownFor];
        out.push({ name: `${name} (${pin}) ${step.stage} · ${step.step}`, argv: flags(step.argv), versions });
      }
    }
    const extract = baseServerSpec(config, 'extract');
    for (const v of CAPTURE_SGLANG_VERSIONS) {
      out.push({
        name: `${name} extract, plugin capture on ${v}`,
        argv: flags(renderServerArgv({ ...extract, capture: { sglangVersion: v, draftLayerIds: [1, 15, 28] } })),
        versions: [v],
      });
    }
    for (const mode of ['stock-aux', 'stock-final'] as const) {
      out.push({
        name: `${name} extract, ${mode}`,
        argv: flags(
          renderServerArgv({ ...extract, capture: { sglangVersion: '0.5.23', draftLayerIds: [1, 15, 28], mode } }),
        ),
        versions: ['0.5.23'],
      });
    }
    const deploy = baseServerSpec(config, 'deploy');
    for (const [label, speculative] of DEPLOY_VARIANTS) {
      const spec: ServerLaunchSpec = { ...deploy, speculative, maxRunningRequests: 250 };
      out.push({ name: `${name} deploy ${label}`, argv: flags(renderServerArgv(spec)), versions: VERSIONS });
    }
    // Rendered for each release (spec.sglangVersion, as preflight resolves it): what aerie
    // launches on a host it knows runs that release, capture-free roles on every one.
    for (const v of VERSIONS) {
      for (const role of ['generate', 'extract', 'baseline'] as const) {
        out.push({
          name: `${name} ${role} rendered for ${v}`,
          argv: flags(renderServerArgv({ ...baseServerSpec(config, role), sglangVersion: v })),
          versions: [v],
        });
      }
      for (const [label, speculative] of DEPLOY_VARIANTS) {
        const spec: ServerLaunchSpec = { ...deploy, speculative, maxRunningRequests: 250, sglangVersion: v };
        out.push({
          name: `${name} deploy ${label} rendered for ${v}`,
          argv: flags(renderServerArgv(spec)),
          versions: [v],
        });
      }
    }
  }
  return out;
}
