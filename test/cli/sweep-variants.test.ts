// `aerie sweep`'s variants and what they share: --vary parsing, the cartesian product with its
// labels (golden), schema errors naming the variant, the field path and the fix, and the sharing
// decision from the ledger's own hash chain.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { writeFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { AERIE_HOME, ConfigError } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';
import { inputsHash } from '../../src/ledger/record.js';
import { shareDecision, stageHashes } from '../../src/cli/sweep-share.js';
import { sweepCommand } from '../../src/cli/sweep.js';
import { buildVariants, MAX_VARIANTS, parseVary, SweepError } from '../../src/cli/sweep-variants.js';
import { useWorkdir } from '../support/workdir.js';

/** The train section whichever driver: the fields these tests set exist on the demo's (specforge). */
const train = (c: Config) => c.stages.train as unknown as Record<string, unknown>;

const DEMO = readFileSync(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8');
const wd = useWorkdir('aerie-sweep-variants-');

describe('parseVary', () => {
  it('reads each value as a YAML scalar', () => {
    expect(parseVary('stages.train.num-epochs=1,2')).toEqual({ path: 'stages.train.num-epochs', values: [1, 2] });
    expect(parseVary('stages.deploy.spec-v2=on, off')).toEqual({
      path: 'stages.deploy.spec-v2',
      values: ['on', 'off'],
    });
    expect(parseVary('stages.benchmark.baseline=true,false').values).toEqual([true, false]);
    expect(parseVary('stages.train.learning-rate=1e-4,0.001').values).toEqual([0.0001, 0.001]);
  });

  it('refuses a malformed --vary with the form to write', () => {
    expect(() => parseVary('num-epochs')).toThrow(/expected <config.path>=<value>,<value>/);
    expect(() => parseVary('=1,2')).toThrow(SweepError);
    expect(() => parseVary('stages..x=1,2')).toThrow(SweepError);
    expect(() => parseVary('stages.train.num-epochs=1,,2')).toThrow(/empty value/);
    expect(() => parseVary('stages.train.num-epochs=1,1')).toThrow(/listed twice/);
  });
});

describe('buildVariants', () => {
  it('makes the product of every --vary, first varying slowest, with short labels (golden)', () => {
    const vs = buildVariants(DEMO, [
      parseVary('stages.train.num-epochs=1,2'),
      parseVary('stages.deploy.num-steps=3,5'),
    ]);
    expect(vs.map((v) => v.label)).toEqual([
      'num-epochs=1 num-steps=3',
      'num-epochs=1 num-steps=5',
      'num-epochs=2 num-steps=3',
      'num-epochs=2 num-steps=5',
    ]);
    expect(vs.map((v) => [train(v.config)['num-epochs'], v.config.stages.deploy['num-steps']])).toEqual([
      [1, 3],
      [1, 5],
      [2, 3],
      [2, 5],
    ]);
    // The run folder's config.yaml: the base file with the setting applied, ${VAR} left for the loader.
    const doc = YAML.parse(vs[1]!.yaml) as { stages: { deploy: { 'num-steps': number } }; hosts: unknown };
    expect(doc.stages.deploy['num-steps']).toBe(5);
    expect(vs[1]!.yaml).toContain('${AERIE_HOME}');
    expect(vs[1]!.settings).toEqual([
      { path: 'stages.train.num-epochs', value: 1 },
      { path: 'stages.deploy.num-steps', value: 5 },
    ]);
  });

  it('sets a field the base file leaves to its default, and a free key under overrides', () => {
    const [a] = buildVariants(DEMO, [
      parseVary('stages.train.learning-rate=0.001,0.002'),
      parseVary('stages.train.overrides.training.max_grad_norm=0.5'),
    ]).slice(0, 1);
    expect(train(a!.config)['learning-rate']).toBe(0.001);
    expect(train(a!.config).overrides).toEqual({ 'training.max_grad_norm': 0.5 });
    expect(a!.label).toBe('learning-rate=0.001 max_grad_norm=0.5');
  });

  it('refuses a path the schema does not have, naming the variant and the path', () => {
    const err = (() => {
      try {
        buildVariants(DEMO, [parseVary('stages.train.num-epoch=1,2')]);
      } catch (e) {
        return e as ConfigError;
      }
      throw new Error('no error');
    })();
    expect(err).toBeInstanceOf(ConfigError);
    expect(err.message).toContain('sweep variant "num-epoch=1"');
    expect(err.message).toMatch(/stages\.train\.num-epoch: unknown key/);
    expect(err.message).toContain('--vary stages.train.num-epoch names no config field: fix the path');
  });

  it('refuses a value the schema refuses, naming the variant and the field', () => {
    expect(() => buildVariants(DEMO, [parseVary('stages.train.num-epochs=1,many')])).toThrow(
      /sweep variant "num-epochs=many"[\s\S]*stages\.train\.num-epochs/,
    );
    expect(() => buildVariants(DEMO, [parseVary('server.port.x=1,2')])).toThrow(
      /server\.port: is the value 30000, not a section/,
    );
  });

  it('refuses too many variants, too few, and a path given twice', () => {
    const many = Array.from({ length: MAX_VARIANTS + 1 }, (_, i) => i + 1).join(',');
    expect(() => buildVariants(DEMO, [parseVary(`stages.train.num-epochs=${many}`)])).toThrow(
      new RegExp(`${MAX_VARIANTS + 1} variants .* at most ${MAX_VARIANTS}`),
    );
    expect(() => buildVariants(DEMO, [parseVary('stages.train.num-epochs=1')])).toThrow(/at least two variants/);
    expect(() => buildVariants(DEMO, [])).toThrow(/at least one --vary/);
    expect(() =>
      buildVariants(DEMO, [parseVary('stages.train.num-epochs=1,2'), parseVary('stages.train.num-epochs=3')]),
    ).toThrow(/given twice/);
  });
});

describe('shareDecision', () => {
  const configs = (vary: string) => buildVariants(DEMO, [parseVary(vary)]).map((v) => v.config);

  it('chains the hashes as the pipeline does: extract on generate, train on extract', () => {
    const [c] = configs('stages.train.num-epochs=1,2');
    const h = stageHashes(c!);
    expect(h.generate).toBe(inputsHash(c!, 'generate', []));
    expect(h.extract).toBe(inputsHash(c!, 'extract', [h.generate]));
    expect(h.train).toBe(inputsHash(c!, 'train', [h.extract]));
  });

  it('shares generate and extract when only a train setting differs', () => {
    const d = shareDecision(configs('stages.train.num-epochs=1,2'));
    expect(d.until).toBe('extract');
    expect(d.reason).toBe(
      'generate, extract computed once for all variants (the same ledger inputs hash in each); train differs',
    );
    expect(new Set(d.hashes.train).size).toBe(2);
  });

  it('shares train too when only deploy settings differ', () => {
    expect(shareDecision(configs('stages.deploy.num-steps=3,5')).until).toBe('train');
  });

  it('shares generate only when an extract setting differs, and nothing when generate differs', () => {
    expect(shareDecision(configs('stages.extract.max-length=1024,2048')).until).toBe('generate');
    const none = shareDecision(configs('stages.generate.temperature=0.5,0.7'));
    expect(none.until).toBeUndefined();
    expect(none.reason).toMatch(/differ in what generate makes/);
  });

  it('knobs the ledger leaves out (how, not what) do not stop sharing', () => {
    expect(shareDecision(configs('stages.generate.concurrency=4,16')).until).toBe('train');
  });

  it('shares nothing across hosts or workdirs: the shared files live on one host', () => {
    const d = shareDecision(configs('hosts.local.workdir=/tmp/a,/tmp/b'));
    expect(d.until).toBeUndefined();
    expect(d.reason).toMatch(/different target hosts or workdirs/);
  });
});

describe('aerie sweep, before anything starts', () => {
  it('refuses a malformed --vary with exit 2 and a config path the schema lacks with a ConfigError', async () => {
    const path = join(wd.path, 'base.yaml');
    await writeFile(path, DEMO);
    let printed = '';
    const out = { write: (s: string) => (printed += s) };
    expect(await sweepCommand(path, ['num-epochs'], { worker: false, out })).toBe(2);
    expect(printed).toContain('aerie sweep: --vary num-epochs: expected <config.path>=<value>,<value>');
    await expect(sweepCommand(path, ['stages.train.num-epoch=1,2'], { worker: false, out })).rejects.toThrow(
      /sweep variant "num-epoch=1"[\s\S]*stages\.train\.num-epoch: unknown key/,
    );
  });
});
