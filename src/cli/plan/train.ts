/** The train stage's steps, per driver, and the drafter directory the deploy step serves. */
import { withRunGpus } from '../../config/gpus.js';
import type { Config } from '../../config/schema.js';
import { vocabMappingPath } from '../../stages/extract/index.js';
import { extractLayout, hiddenForTrain, trainSpec } from '../../stages/launch-specs.js';
import {
  commandDrafterDir,
  renderCommandArgv,
  renderSpecforgeConfig,
  renderSpecforgeExportArgv,
  renderSpecforgeTrainArgv,
  renderTrainArgv,
} from '../../stages/train/index.js';
import { pinnedProfile, revisionNotes } from './revision.js';
import type { PlanPaths, PlanStep } from './step.js';

export function trainSteps(config: Config, p: PlanPaths, dataPath: string): { steps: PlanStep[]; drafterDir: string } {
  const host = config.target.host;
  const e = config.stages.extract;
  const steps: PlanStep[] = [];
  const layout = extractLayout(config);
  // The CLI's prepare step writes the vocab mapping beside the features (from ca949555); the
  // v0.2 scripts' does not, nor does aerie's converter (SpecForge then builds it at the start of
  // training), and the activity passes on only a mapping that is really there.
  const t = config.stages.train;
  const mapping =
    e.driver === 'specforge-offline' && t.driver === 'specforge' ? { vocabMapping: vocabMappingPath(p.hidden) } : {};
  const hidden = hiddenForTrain(config, { dir: p.hidden, layout, ...mapping });
  const spec = trainSpec(config, p, dataPath, hidden, pinnedProfile(config));
  let drafterDir: string;
  if (spec.driver === 'specforge-v0.2') {
    steps.push({
      host,
      stage: 'train',
      step: 'train_eagle3.py (detached)',
      argv: renderTrainArgv(spec.launch),
      env: withRunGpus(config, t.env),
      notes: trainNotes(config, layout, hidden !== undefined),
    });
    drafterDir = `${spec.launch.outputDir}/epoch_<e>_step_<s>`;
  } else if (spec.driver === 'specforge') {
    steps.push({
      host,
      stage: 'train',
      step: 'specforge train (detached)',
      argv: renderSpecforgeTrainArgv(spec.run),
      env: withRunGpus(config, t.env),
      files: { [spec.run.configPath]: renderSpecforgeConfig(spec.run) },
      notes: [
        ...trainNotes(config, layout, hidden !== undefined),
        `after a crash: + training.resume_from=${spec.run.outputDir}/${spec.run.runId}-step<N> (newest complete)`,
      ],
    });
    steps.push({
      host,
      stage: 'train',
      step: 'specforge export (detached)',
      argv: renderSpecforgeExportArgv(spec.run, `${spec.run.outputDir}/${spec.run.runId}-step<N>`, spec.drafterDir),
      env: withRunGpus(config, t.env),
      notes: spec.run.vocabMappingPath
        ? [`--vocab-mapping ${spec.run.vocabMappingPath}: passed when the prepare step wrote it`]
        : undefined,
    });
    drafterDir = spec.drafterDir;
  } else {
    steps.push({
      host,
      stage: 'train',
      step: 'trainer command (detached)',
      argv: renderCommandArgv(spec.template, spec.values),
      env: withRunGpus(config, t.env),
      notes: trainNotes(config, layout, hidden !== undefined),
    });
    drafterDir = commandDrafterDir(spec.template, spec.values);
  }
  return { steps, drafterDir };
}

function trainNotes(config: Config, layout: string, offline: boolean): string[] {
  const t = config.stages.train;
  const revision = t.driver === 'command' ? [] : revisionNotes(t.driver, t['specforge-revision']);
  return [...revision, ...dataNotes(layout, offline)];
}

function dataNotes(layout: string, offline: boolean): string[] {
  if (offline) return [`offline: reads the extract stage's ${layout} hidden states`];
  return ['online: the trainer runs the target itself'];
}
