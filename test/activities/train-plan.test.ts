/** The train stage's plan for the CLI driver: the checkpoint the heartbeat shows comes from `-latest`, since HEAD's log names none. */
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { runPaths } from '../../src/activities/context.js';
import { trainPlan } from '../../src/activities/train.js';
import { demoConfig } from '../support/demo-config.js';
import { useLocalHost } from '../support/local-host.js';

const local = useLocalHost('aerie-plan-');

it("names the checkpoint the CLI's -latest link points at, and nothing before there is one", async () => {
  const { dir, host } = local;
  const config = demoConfig(dir, 30000);
  const hidden = { dir: runPaths(host, 'r1').hidden, layout: 'specforge' as const };
  const plan = trainPlan(config, host, 'r1', join(dir, 'train.jsonl'), hidden, 'cli', { heartbeat: () => undefined });
  expect(await plan.latestCheckpoint!()).toBeUndefined();
  const runId = config.stages.train.driver === 'specforge' ? config.stages.train['run-id'] : 'x';
  await mkdir(join(plan.outputDir, `${runId}-step40`), { recursive: true });
  await writeFile(join(plan.outputDir, `${runId}-step40`, 'training_state.pt'), 'x');
  await symlink(`${runId}-step40`, join(plan.outputDir, `${runId}-latest`));
  expect(await plan.latestCheckpoint!()).toBe(join(plan.outputDir, `${runId}-step40`));
});
