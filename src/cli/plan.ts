/**
 * `aerie plan <config>`: every command each stage would run, per host, with its environment —
 * rendered by the same functions the activities launch with, and nothing is run. Environment
 * values are shown as written in the config: a ${VAR} reference stays a reference (it is
 * expanded on the worker at launch time, and never printed).
 */
import { loadConfigFile } from '../config/load.js';
import { describePlace, placeConfig, poolPlaces } from '../config/pool.js';
import type { Config } from '../config/schema.js';
import { extractSteps } from './plan/extract.js';
import { renderPlan } from './plan/render.js';
import { serverStep } from './plan/server.js';
import { planPaths, type PlanStep } from './plan/step.js';
import { trainSteps } from './plan/train.js';

export { renderPlan } from './plan/render.js';
export { revisionNotes } from './plan/revision.js';
export { planRelease } from './plan/server.js';
export type { PlanStep } from './plan/step.js';

export function planRun(config: Config, runId = '<run-id>'): PlanStep[] {
  const host = config.target.host;
  const workdir = config.hosts[host]!.workdir;
  const p = planPaths(workdir, runId);
  const g = config.stages.generate;
  const steps: PlanStep[] = [];
  const dataPath = `${p.data}/train.jsonl`;

  // A pool: one launch per server, each the run aimed at its place (the activities launch it so).
  const places = poolPlaces(config);
  if (!places) steps.push(serverStep(config, 'generate', 'generate'));
  for (const place of places ?? []) {
    const step = serverStep(placeConfig(config, place), 'generate', 'generate');
    steps.push({ ...step, step: `launch generate server s${place.index} (${describePlace(place)})` });
  }
  steps.push({
    host,
    stage: 'generate',
    step: 'regenerate assistant turns',
    notes: [
      `POST /v1/chat/completions for every assistant turn of ${g.input}${g['num-samples'] ? ` (first ${g['num-samples']} samples)` : ''}: ` +
        `temperature ${g.temperature}, max_tokens ${g['max-tokens']}, ${g.concurrency} requests in flight${places ? ' per server' : ''}, ${g['request-retries']} retries`,
      ...(places
        ? [
            `a pool of ${places.length} servers: each takes the next batch (${g['batch-size'] ? `${g['batch-size']} samples` : 'max(8 × concurrency, samples ÷ (16 × servers)) samples'}) as it frees up; a dead server's batch goes back to the pool`,
          ]
        : []),
      `writes ${p.data}/{train,train_error,train_skipped,train_rejected}.jsonl and manifest.json; resumable by sample id`,
    ],
  });

  steps.push(...extractSteps(config, p, dataPath, runId));
  const train = trainSteps(config, p, dataPath);
  steps.push(...train.steps);

  const deployDrafter = config.stages.deploy['draft-model-path'] ?? train.drafterDir;
  steps.push({ ...serverStep(config, 'deploy', 'deploy', deployDrafter) });
  steps.push({
    host,
    stage: 'deploy',
    step: 'acceptance gate',
    notes: [
      `${config.stages.deploy['acceptance-requests']} greedy requests; refuse below accept length ${config.stages.deploy['acceptance-threshold']}`,
    ],
  });
  steps.push({
    host,
    stage: 'benchmark',
    step: 'sweep',
    notes: [
      `concurrency ${config.stages.benchmark.concurrencies.join(', ')} against the drafter${config.stages.benchmark.baseline ? ', then the target alone' : ''}`,
    ],
  });
  if (config.stages.benchmark.baseline) steps.push(serverStep(config, 'baseline', 'benchmark'));
  return steps;
}

export async function planCommand(path: string, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const config = await loadConfigFile(path);
  out.write(renderPlan(config, planRun(config), path));
  return 0;
}
