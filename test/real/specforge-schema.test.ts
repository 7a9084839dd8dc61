/**
 * The SpecForge configs aerie writes are judged by SpecForge's own loader (PyPI
 * specforge==0.2.0 = SpecForge@a6b6b023's CLI: `specforge train -c` calls load_config at
 * specforge/cli.py:242), not by aerie's idea of it. Part (c) proves the judge can say no.
 */
import { TRAIN_HYPER } from '../support/train-hyper.js';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { planRun } from '../../src/cli/plan.js';
import { AERIE_HOME, loadConfigFile } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { extractLayout, hiddenForTrain, trainSpec } from '../../src/stages/launch-specs.js';
import {
  renderSpecforgeConfig,
  renderSpecforgeTrainArgv,
  type SpecforgeRun,
} from '../../src/stages/train/specforge-config.js';
import { specforgeSchemaCheck } from './judges.js';

const env = { ...process.env, AERIE_HOME, HF_TOKEN: process.env.HF_TOKEN ?? 'unused-by-plan' };

async function examples(): Promise<{ name: string; config: Config }[]> {
  const dir = join(AERIE_HOME, 'examples');
  const files = readdirSync(dir)
    .filter((f) => /\.ya?ml$/.test(f))
    .sort();
  return Promise.all(
    files.map(async (f) => ({ name: `examples/${f}`, config: await loadConfigFile(join(dir, f), env) })),
  );
}

/** The overrides aerie appends to `specforge train -c <config>` (everything after the config path). */
function trainOverrides(run: SpecforgeRun, resumeFrom?: string): string[] {
  const argv = renderSpecforgeTrainArgv(run, resumeFrom);
  return argv.slice(argv.indexOf(run.configPath) + 1);
}

function expectAccepted(yaml: string, overrides: string[] = [], what = ''): void {
  const verdict = specforgeSchemaCheck(yaml, overrides);
  expect(
    verdict.errors,
    `${what}: SpecForge's schema rejected aerie's config\n${yaml}\noverrides ${overrides.join(' ')}`,
  ).toEqual([]);
  expect(verdict.ok).toBe(true);
}

describe("SpecForge's own schema accepts what aerie writes for the examples and the demo", () => {
  it('every config whose train driver is specforge: the rendered config.yaml, fresh and with the resume override', async () => {
    const checked: string[] = [];
    for (const { name, config } of await examples()) {
      if (config.stages.train.driver !== 'specforge') continue;
      const step = planRun(config).find((s) => s.stage === 'train' && s.files);
      expect(step, `${name}: aerie plan shows no specforge config`).toBeDefined();
      const [configPath, yaml] = Object.entries(step!.files!)[0]!;
      expect(step!.argv).toContain(configPath);
      // The same run as the launch builds it, to render the relaunch after a crash.
      const paths = { root: '/r', logs: '/r/logs', hidden: '/r/hidden_states', train: '/r/train' };
      const spec = trainSpec(
        config,
        paths,
        '/r/data/train.jsonl',
        hiddenForTrain(config, { dir: paths.hidden, layout: extractLayout(config) }),
      );
      if (spec.driver !== 'specforge') throw new Error('unreachable');
      expectAccepted(yaml, trainOverrides(spec.run), `${name} fresh launch`);
      expectAccepted(
        yaml,
        trainOverrides(spec.run, `${spec.run.outputDir}/${spec.run.runId}-step40`),
        `${name} resumed`,
      );
      checked.push(name);
    }
    expect(checked.length, 'no example (nor the demo) uses the specforge driver: nothing was judged').toBeGreaterThan(
      0,
    );
  });
});

const base: SpecforgeRun = {
  launcher: ['specforge'],
  configPath: '/r/train/specforge.yaml',
  runId: 'run',
  outputDir: '/r/train/output',
  targetModelPath: '/models/target',
  draftModelConfig: '/models/draft.json',
  targetBackend: 'sglang',
  trainDataPath: '/r/data/train.jsonl',
  hiddenStatesPath: '/r/hidden_states',
  ...TRAIN_HYPER,
  saveInterval: 50,
  overrides: {},
};

describe("SpecForge's own schema accepts every offline SpecforgeRun shape aerie renders", () => {
  const cases: [string, SpecforgeRun][] = [
    ['offline, no vocab mapping', base],
    [
      'offline, with the prepare step’s vocab mapping',
      { ...base, vocabMappingPath: '/r/hidden_states/vocab_mapping/vocab_mapping.pt' },
    ],
    ['max-steps', { ...base, maxSteps: 120 }],
    ['max-checkpoints', { ...base, maxCheckpoints: 3 }],
    ['max-checkpoints 0 (keep all)', { ...base, maxCheckpoints: 0 }],
    [
      'researcher overrides, nested and scalar',
      {
        ...base,
        overrides: {
          'deployment.trainer.nproc_per_node': 8,
          'training.lr_scheduler': 'constant',
          'training.compact_teacher': true,
          'data.dataloader_num_workers': 2,
        },
      },
    ],
  ];
  for (const [name, run] of cases) {
    it(`${name}: fresh and resumed`, () => {
      const yaml = renderSpecforgeConfig(run);
      expectAccepted(yaml, trainOverrides(run), name);
      expectAccepted(yaml, trainOverrides(run, `${run.outputDir}/${run.runId}-step100`), `${name}, resumed`);
    });
  }

  it('the vocab mapping the extract stage hands to train is written as model.vocab_mapping_path, and SpecForge accepts it', async () => {
    const vocabMapping = '/r/hidden_states/vocab_mapping/vocab_mapping.pt';
    const specforgeExamples = (await examples()).filter((e) => e.config.stages.train.driver === 'specforge');
    expect(specforgeExamples.length).toBeGreaterThan(0);
    for (const { name, config } of specforgeExamples) {
      const spec = trainSpec(
        config,
        { root: '/r', logs: '/r/logs', hidden: '/r/hidden_states', train: '/r/train' },
        '/r/data/train.jsonl',
        {
          dir: '/r/hidden_states',
          layout: 'specforge',
          vocabMapping,
        },
      );
      if (spec.driver !== 'specforge') throw new Error('unreachable');
      const yaml = renderSpecforgeConfig(spec.run);
      // Without it SpecForge trains the draft with no t2d/d2t mapping (SpecForge@a6b6b023:specforge/config/schema.py:67-68).
      expect(yaml, `${name}: the prepare step's vocab mapping is not passed to specforge train`).toContain(
        `vocab_mapping_path: ${vocabMapping}`,
      );
      expectAccepted(yaml, trainOverrides(spec.run), `${name} with vocab mapping`);
    }
  });
});

describe('the judge rejects what SpecForge rejects', () => {
  it('online training (data.train_data_path, no deployment.mode) is refused with SpecForge’s own message, as aerie refuses it', () => {
    // aerie no longer renders this (it refuses online runs itself), so the online document is
    // aerie's offline one with the data source swapped: exactly what aerie used to write.
    expect(() => renderSpecforgeConfig({ ...base, hiddenStatesPath: undefined })).toThrow(/offline only/);
    const doc = parse(renderSpecforgeConfig(base)) as { data: Record<string, unknown> };
    delete doc.data.hidden_states_path;
    doc.data.train_data_path = base.trainDataPath;
    const verdict = specforgeSchemaCheck(stringify(doc));
    expect(verdict.ok).toBe(false);
    // SpecForge@a6b6b023:specforge/config/schema.py:706-710
    expect(verdict.errors.map((e) => e.msg).join('\n')).toContain(
      'online training requires deployment.mode=disaggregated',
    );
  });

  it('target_backend "hf" is refused: the schema allows only sglang', () => {
    // As `specforge train -c cfg model.target_backend=hf` (aerie itself no longer renders hf).
    const verdict = specforgeSchemaCheck(renderSpecforgeConfig(base), ['model.target_backend=hf']);
    expect(verdict.ok).toBe(false);
    // SpecForge@a6b6b023:specforge/config/schema.py:54 (Literal["sglang"])
    expect(verdict.errors.find((e) => e.loc === 'model.target_backend')?.msg).toMatch(/sglang/);
  });

  it('an override of a key the schema does not have is refused, as `specforge train` refuses it', () => {
    const verdict = specforgeSchemaCheck(renderSpecforgeConfig(base), ['training.no_such_key=1']);
    expect(verdict.ok).toBe(false);
    // SpecForge@a6b6b023:specforge/config/schema.py:948 (apply_overrides)
    expect(verdict.errors[0]?.msg).toContain("override path 'training.no_such_key' does not exist");
  });
});
