import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { argsDump, parseTrainArgs, pyFloat } from '../../sim/train/args.js';
import { trainOptions } from '../../sim/train/options.js';
import { acceptLength } from '../../sim/train/quality.js';
import { formatBar, formatInterval, formatMeter } from '../../sim/train/tqdm.js';

const REQUIRED = ['--target-model-path', '/m', '--train-data-path', '/d.jsonl', '--output-dir', '/o'];

const ok = (argv: string[]): Record<string, unknown> => {
  const r = parseTrainArgs(argv);
  if (r.kind !== 'ok') throw new Error(`expected ok, got ${r.kind}: ${'text' in r ? r.text : ''}`);
  return r.args;
};
const errorLine = (argv: string[]): string => {
  const r = parseTrainArgs(argv);
  if (r.kind !== 'error') throw new Error(`expected an error, got ${r.kind}`);
  expect(r.text).toMatch(/^usage: train_eagle3\.py \[-h\] --target-model-path TARGET_MODEL_PATH/);
  return r.text.trimEnd().split('\n').pop() ?? '';
};

describe('train_eagle3.py argument parsing (argparse rules)', () => {
  it('takes the v0.2 flags with their types and defaults', () => {
    const a = ok([
      ...REQUIRED,
      '--num-epochs',
      '2',
      '--learning-rate',
      '1e-4',
      '--resume',
      '--ckpt-dir',
      '/o/epoch_0_step_40',
    ]);
    expect(a).toMatchObject({
      target_model_path: '/m',
      num_epochs: 2,
      learning_rate: 1e-4,
      resume: true,
      ckpt_dir: '/o/epoch_0_step_40',
      batch_size: 1,
      save_interval: 5000,
      draft_model_config: null,
      chat_template: 'llama3',
    });
  });

  it('accepts --flag=value, unique abbreviations, and lets the last occurrence win', () => {
    expect(ok([...REQUIRED, '--num-ep=3', '--save-int', '7', '--batch-size', '2', '--batch-size', '4'])).toMatchObject({
      num_epochs: 3,
      save_interval: 7,
      batch_size: 4,
    });
    expect(
      ok([...REQUIRED, '--sglang-piecewise-cuda-graph-tokens', '128', '256', '--seed', '1'])
        .sglang_piecewise_cuda_graph_tokens,
    ).toEqual([128, 256]);
  });

  it('refuses what argparse refuses, with its messages', () => {
    expect(errorLine([...REQUIRED, '--bogus', '1'])).toBe('train_eagle3.py: error: unrecognized arguments: --bogus 1');
    expect(errorLine(['--output-dir', '/o'])).toBe(
      'train_eagle3.py: error: the following arguments are required: --target-model-path, --train-data-path',
    );
    expect(errorLine([...REQUIRED, '--num-epochs', 'two'])).toBe(
      "train_eagle3.py: error: argument --num-epochs: invalid int value: 'two'",
    );
    expect(errorLine([...REQUIRED, '--max', '3'])).toMatch(
      /^train_eagle3\.py: error: ambiguous option: --max could match --max-num-steps, --max-length/,
    );
    expect(errorLine([...REQUIRED, '--save-interval'])).toBe(
      'train_eagle3.py: error: argument --save-interval: expected one argument',
    );
    expect(errorLine([...REQUIRED, '--resume=yes'])).toBe(
      "train_eagle3.py: error: argument --resume: ignored explicit argument 'yes'",
    );
    expect(errorLine([...REQUIRED, '--report-to', 'slack'])).toBe(
      "train_eagle3.py: error: argument --report-to: invalid choice: 'slack' (choose from 'wandb', 'tensorboard', 'swanlab', 'mlflow', 'none')",
    );
  });

  it('prints help for -h', () => {
    const r = parseTrainArgs(['-h']);
    expect(r.kind).toBe('help');
    expect(r.kind === 'help' && r.text).toContain('  --ckpt-dir CKPT_DIR');
  });

  it('dumps args the way print_args_with_dots does', () => {
    const a = ok([...REQUIRED, '--learning-rate', '0.00001']);
    const dump = argsDump(
      { target_model_path: a.target_model_path, learning_rate: a.learning_rate, resume: a.resume } as never,
      [['dp_size', 1]],
    );
    expect(dump).toBe(
      '\n -----------【args】-----------\n' +
        'target_model_path ······························· /m\n' +
        'learning_rate     ···························· 1e-05\n' +
        'resume            ···························· False\n' +
        'dp_size           ································ 1\n',
    );
    expect([pyFloat(0.0001), pyFloat(2), pyFloat(0.4), pyFloat(1e-7)]).toEqual(['0.0001', '2.0', '0.4', '1e-07']);
  });
});

describe('tqdm meter', () => {
  it('formats like tqdm in a log file (10-wide bar, rate, postfix)', () => {
    expect(formatMeter({ desc: 'Training Epoch 0', n: 0, total: 96, elapsedS: 0 })).toBe(
      'Training Epoch 0:   0%|          | 0/96 [00:00<?, ?it/s]',
    );
    expect(
      formatMeter({
        desc: 'Training Epoch 1',
        n: 40,
        total: 96,
        elapsedS: 20,
        postfix: { loss: '4.31', acc: '0.37', time: '0.50s' },
      }),
    ).toBe('Training Epoch 1:  42%|████▏     | 40/96 [00:20<00:28,  2.00it/s, loss=4.31, acc=0.37, time=0.50s]');
    expect(formatMeter({ desc: 'Training Epoch 0', n: 3, total: 10, elapsedS: 7.5 })).toBe(
      'Training Epoch 0:  30%|███       | 3/10 [00:07<00:17,  2.50s/it]',
    );
    expect([formatBar(1), formatInterval(3725)]).toEqual(['██████████', '1:02:05']);
  });
});

describe('drafter quality', () => {
  it('is ~1.4 for a handful of samples, 2.5–3 for the demo, approaching 3.8 for published recipes', () => {
    expect(acceptLength(0)).toBe(1);
    expect(acceptLength(4)).toBeCloseTo(1.4, 1);
    const demo = acceptLength(96 * 2);
    expect(demo).toBeGreaterThanOrEqual(2.5);
    expect(demo).toBeLessThanOrEqual(3);
    expect(acceptLength(500_000 * 3)).toBeGreaterThan(3.75);
    expect(acceptLength(500_000 * 3)).toBeLessThanOrEqual(3.8);
    for (const [a, b] of [
      [10, 100],
      [100, 1000],
      [1000, 100000],
    ])
      expect(acceptLength(b)).toBeGreaterThan(acceptLength(a));
  });
});

describe('train_eagle3.py argument parsing by revision (sim/train/options.ts)', () => {
  const at = (rev: 'v0.2.0' | 'v0.2-final-save' | 'v0.2-resume', argv: string[]) =>
    parseTrainArgs([...REQUIRED, ...argv], rev);

  it("resolves abbreviations against the revision's own flags: --sp is unknown at v0.2.0, ambiguous once the SP flags exist", () => {
    const v020 = at('v0.2.0', ['--sp', '2']);
    expect(v020.kind === 'error' && v020.text.trimEnd().split('\n').pop()).toBe(
      'train_eagle3.py: error: unrecognized arguments: --sp 2',
    );
    const later = at('v0.2-final-save', ['--sp', '2']);
    expect(later.kind === 'error' && later.text.trimEnd().split('\n').pop()).toBe(
      'train_eagle3.py: error: ambiguous option: --sp could match --sp-ulysses-size, --sp-ring-size',
    );
  });

  it('takes both spellings of a BooleanOptionalAction and shows them as argparse does', () => {
    const on = at('v0.2-resume', ['--shard-target-output']);
    const off = at('v0.2-resume', ['--no-shard']);
    const unset = at('v0.2-resume', []);
    expect([on, off, unset].map((r) => r.kind === 'ok' && r.args.shard_target_output)).toEqual([true, false, null]);
    const help = parseTrainArgs(['-h'], 'v0.2-resume');
    expect(help.kind === 'help' && help.text).toContain('[--shard-target-output | --no-shard-target-output]');
  });

  it('keeps every flag aerie renders at every revision', () => {
    const aerie = [
      '--draft-model-config',
      '/c',
      '--train-hidden-states-path',
      '/h',
      '--chat-template',
      'llama3',
      '--max-length',
      '2048',
      '--num-epochs',
      '2',
      '--batch-size',
      '1',
      '--learning-rate',
      '1e-4',
      '--ttt-length',
      '7',
      '--tp-size',
      '1',
      '--save-interval',
      '500',
      '--ckpt-dir',
      '/o/x',
      '--max-num-steps',
      '9',
      '--resume',
    ];
    for (const rev of ['v0.2.0', 'v0.2-final-save', 'v0.2-resume'] as const)
      expect(at(rev, aerie).kind, rev).toBe('ok');
  });
});

describe("the simulator's option tables are the real parsers' (test/fixtures/real/specforge-*/argparse, read from the source)", () => {
  interface RealArg {
    flags: string[];
    type?: string;
    nargs?: string;
    action?: string | { class: string };
    default?: unknown;
    required?: boolean;
    choices?: unknown;
  }
  const real = (commit: string): RealArg[] =>
    (
      JSON.parse(
        readFileSync(
          new URL(`../fixtures/real/specforge-${commit}/argparse/train_eagle3.json`, import.meta.url),
          'utf8',
        ),
      ) as { arguments: RealArg[] }
    ).arguments;
  const kindOf = (a: RealArg): string =>
    a.action === 'store_true'
      ? 'flag'
      : typeof a.action === 'object' && a.action.class === 'BooleanOptionalAction'
        ? 'bool-optional'
        : a.nargs === '+'
          ? `${a.type}-list`
          : a.type!;

  for (const [rev, commit] of [
    ['v0.2.0', '73e6f808'],
    ['v0.2-resume', '20e2e3f0'],
  ] as const) {
    it(`${rev} = SpecForge@${commit}: the same flags in the same order, with their kinds, defaults, choices and required`, () => {
      const mine = trainOptions(rev).map((o) => ({
        flag: o.flag,
        kind: o.kind,
        default: o.kind === 'flag' ? false : o.default,
        required: o.required ?? false,
        choices: o.choices,
      }));
      const theirs = real(commit).map((a) => ({
        flag: a.flags[0],
        kind: kindOf(a),
        default: a.action === 'store_true' ? false : (a.default ?? null),
        required: a.required ?? false,
        // SGLang's backend list comes from the installed SGLang; the simulator takes any name.
        choices: Array.isArray(a.choices) ? a.choices : undefined,
      }));
      expect(mine).toEqual(theirs);
    });
  }
});
