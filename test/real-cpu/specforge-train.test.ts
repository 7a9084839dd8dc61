/**
 * aerie's `specforge` train driver against REAL SpecForge (PyPI specforge==0.2.0, the current
 * CLI) on the CPU, through LocalHost and superviseJob without Temporal: a tiny random Llama
 * target and offline features built from its real forward pass, `specforge train -c` with
 * the config aerie writes, a SIGKILL in the middle of the run, the relaunch aerie plans from
 * the newest complete checkpoint, `specforge export`, and aerie's drafter verification.
 * The only swaps are scripts/real/specforge_cpu.py's plain-torch loss (Triton needs a GPU)
 * and training.fsdp_sharding=NO_SHARD (FSDP needs an accelerator).
 */
import { existsSync, readdirSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { trainPlan } from '../../src/activities/train.js';
import { runPaths } from '../../src/activities/context.js';
import { parseConfigText } from '../../src/config/load.js';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { superviseJob } from '../../src/stages/common/job-supervise.js';
import type { TrainProgress } from '../../src/stages/train/progress.js';
import type { TrainResult } from '../../src/stages/train/run.js';
import { useLocalHost } from '../support/local-host.js';
import { runOk, signalGroup } from '../support/processes.js';

const run = runOk;
const ROOT = resolve(import.meta.dirname, '../..');
const PY = join(ROOT, '.venv-real/bin/python');
const REAL = join(ROOT, 'scripts/real');
const RUN_ID = 'r1';
const SF_RUN = 'tiny';

const fx = useLocalHost('aerie-real-sf-', { sub: 'host' });
let dir: string;
let host: LocalHost;
let target: string;
let draftConfig: string;
let hidden: string;

beforeAll(async () => {
  ({ dir, host } = fx);
  target = join(dir, 'target');
  draftConfig = join(dir, 'draft-config.json');
  hidden = runPaths(host, RUN_ID).hidden;
  await run(PY, [join(REAL, 'make_tiny_target.py'), target, '--draft-config', draftConfig], { cwd: dir });
  await run(PY, [join(REAL, 'make_features.py'), target, hidden], { cwd: dir });
});

const configYaml = () => `
run: { label: real-cpu }
hosts:
  local: { kind: local, workdir: ${join(dir, 'host')} }
target: { model-path: ${target}, host: local }
server: { launcher: [python3, -m, sglang.launch_server] }
stages:
  generate: { input: ${join(dir, 'prompts.jsonl')} }
  extract: { driver: specforge-offline }
  train:
    driver: specforge
    launcher: [${PY}, ${join(REAL, 'specforge_cpu.py')}]
    draft-model-config: ${draftConfig}
    num-epochs: 1
    max-steps: 12
    batch-size: 1
    max-length: 256
    ttt-length: 3
    save-interval: 4
    max-checkpoints: 2
    run-id: ${SF_RUN}
    crash-retries: 2
    env: { HF_HUB_OFFLINE: "1", PYTHONUNBUFFERED: "1", TOKENIZERS_PARALLELISM: "false" }
    overrides:
      training.fsdp_sharding: NO_SHARD
      training.log_interval: 1
      training.attention_backend: sdpa
`;

/** SIGKILL the first trainer launch's process group the moment its step-8 checkpoint directory appears. */
function killAtStep8(outputDir: string): { stop: () => void; killed: () => boolean } {
  let done = false;
  let busy = false;
  // eslint-disable-next-line @typescript-eslint/no-misused-promises -- a failed poll is meant to surface as an unhandled rejection, which fails the vitest run
  const timer = setInterval(async () => {
    if (done || busy) return;
    busy = true;
    try {
      const rec = await host.findLaunch(`${RUN_ID}.train.0`);
      if (rec && existsSync(outputDir) && readdirSync(outputDir).includes(`${SF_RUN}-step8`)) {
        done = true;
        signalGroup(rec.pgid, 'SIGKILL'); // the fault: the trainer's recorded group dies mid-run
      }
    } finally {
      busy = false;
    }
  }, 5);
  return { stop: () => clearInterval(timer), killed: () => done };
}

describe('real SpecForge (CPU) under aerie', () => {
  it('trains, survives a SIGKILL mid-run by resuming from the newest complete checkpoint, exports and verifies the drafter', async () => {
    const config = parseConfigText(configYaml(), 'real-cpu.yaml');
    const seen: TrainProgress[] = [];
    const {
      dir: trainDir,
      outputDir,
      prefix,
      hooks,
    } = trainPlan(
      config,
      host,
      RUN_ID,
      join(dir, 'unused-train.jsonl'),
      { dir: hidden, layout: 'specforge', vocabMapping: `${hidden}/vocab_mapping/vocab_mapping.pt` },
      'cli',
      { heartbeat: () => undefined },
    );
    await host.mkdirp(outputDir);
    const killer = killAtStep8(outputDir);
    const t0 = Date.now();
    let outcome: { result: TrainResult; launches: number; argv: string[] };
    try {
      outcome = await superviseJob<TrainResult, TrainProgress>(
        {
          host,
          prefix,
          logPath: (gen) => `${trainDir}/train-${gen}.log`,
          cwd: trainDir,
          env: { HF_HUB_OFFLINE: '1', PYTHONUNBUFFERED: '1', TOKENIZERS_PARALLELISM: 'false' },
          crashRetries: 2,
          pollMs: 200,
          heartbeat: (d) => d.progress && seen.push(d.progress),
          what: 'trainer',
          crashType: 'TrainerCrashed',
        },
        hooks,
      );
    } finally {
      killer.stop();
    }
    const wallS = (Date.now() - t0) / 1000;
    expect(killer.killed()).toBe(true);

    // Two trainer launches: the first killed during step 8's save, the second from step 4.
    expect(outcome.launches).toBe(2);
    const first = (await host.findLaunch(`${RUN_ID}.train.0`))!.argv;
    const second = (await host.findLaunch(`${RUN_ID}.train.1`))!.argv;
    expect(first.slice(-3)).toEqual(['train', '-c', `${trainDir}/specforge.yaml`]);
    expect(second.at(-1)).toBe(`training.resume_from=${outputDir}/${SF_RUN}-step4`);
    const resumedLog = await readFile(`${trainDir}/train-1.log`, 'utf8');
    // SpecForge@a6b6b023:specforge/training/checkpoint.py:109-121: saving step 8 again deletes the partial one first.
    expect(resumedLog).toContain(`rewinding checkpoint timeline at step 8: deleting ${outputDir}/${SF_RUN}-step8`);
    expect(resumedLog).toMatch(/^step 5: \{/m);
    expect(resumedLog).not.toMatch(/^step 4: \{/m);

    // Progress read from the real `step N: {...}` lines (SpecForge@a6b6b023:specforge/training/assembly.py:281-291).
    const last = seen.at(-1)!;
    expect(last.step).toBe(12);
    expect(typeof last.loss).toBe('number');
    expect(Number.isFinite(last.loss)).toBe(true);

    // Export ran on the final checkpoint and aerie verified the drafter before returning it.
    expect(outcome.result.drafterDir).toBe(`${trainDir}/drafter`);
    const exportArgv = (await host.findLaunch(`${RUN_ID}.train-export.0`))!.argv;
    expect(exportArgv).toContain(`${outputDir}/${SF_RUN}-step12`);
    const cfg = JSON.parse(await readFile(`${trainDir}/drafter/config.json`, 'utf8')) as Record<string, unknown>;
    expect(cfg.architectures).toEqual(['LlamaForCausalLMEagle3']);
    expect(cfg.draft_vocab_size).toBe(512);
    console.log(
      `real SpecForge on CPU: 12 steps over 2 launches (killed at step 8's save, resumed from step 4) + export in ${wallS.toFixed(1)} s`,
    );
  });
});
