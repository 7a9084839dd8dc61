/**
 * The transformers extract driver without torch: its config (defaults, refusals), the job's argv
 * as the activity launches it and `aerie plan` prints it (one spec builder), the plan lines (no
 * extraction server), its progress lines, and how its exits are classified.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfigText } from '../../src/config/load.js';
import { planRun, type PlanStep } from '../../src/cli/plan.js';
import { hfExtractSpec } from '../../src/stages/launch-specs.js';
import {
  classifyHfFailure,
  hfFailureType,
  parseHfProgress,
  renderHfExtractArgv,
} from '../../src/stages/extract/hf-driver.js';

const yaml = (extract: string, serverExtra = '[]') => `
hosts:
  gpu: { kind: local, workdir: /srv/aerie }
target: { model-path: /models/tiny, host: gpu }
server: { extra-args: ${serverExtra} }
stages:
  generate: { input: /data/prompts.jsonl }
  extract: ${extract}
  train: { draft-model-config: /cfg/draft.json }
`;

function problemsOf(text: string): string[] {
  try {
    parseConfigText(text, 'test.yaml', {});
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

describe('stages.extract.driver: transformers (config)', () => {
  it('fills the host-side defaults of the server drivers, and its own', () => {
    const e = parseConfigText(yaml('{ driver: transformers }'), 't.yaml', {}).stages.extract;
    expect(e).toEqual({
      driver: 'transformers',
      python: 'python3',
      'chat-template': 'llama3',
      'max-length': 2048,
      'file-group-size': 2000,
      'cross-check': 'auto',
      'self-check': { samples: 8, 'final-samples': 32, 'min-agreement': 0.5 },
      dtype: 'auto',
      device: 'auto',
      'batch-size': 16,
      env: {},
      'crash-retries': 3,
    });
  });

  it('refuses what does not apply or is out of range, naming the field', () => {
    expect(problemsOf(yaml('{ driver: transformers, concurrency: 8 }')).join('\n')).toMatch(
      /stages\.extract.*concurrency/,
    );
    expect(problemsOf(yaml('{ driver: transformers, dump-dir: /dev/shm/x }')).join('\n')).toMatch(/dump-dir/);
    expect(problemsOf(yaml('{ driver: transformers, device: tpu }')).join('\n')).toMatch(/stages\.extract\.device/);
    expect(problemsOf(yaml('{ driver: vllm }')).join('\n')).toMatch(/"stock-server" or "transformers"/);
  });
});

describe('the job argv and plan lines', () => {
  const config = parseConfigText(
    yaml(
      '{ driver: transformers, python: /opt/venv/bin/python, max-length: 512, dtype: float32, device: cpu, batch-size: 4, file-group-size: 100, self-check: { samples: 2, final-samples: 6 } }',
      '[--trust-remote-code]',
    ),
    't.yaml',
    {},
  );
  const ARGV = [
    '/opt/venv/bin/python',
    '-m',
    'aerie_hs.hf_extract',
    '--model',
    '/models/tiny',
    '--data',
    '/srv/aerie/runs/r1/data/train.jsonl',
    '--out',
    '/srv/aerie/runs/r1/hidden_states',
    '--draft-model-config',
    '/cfg/draft.json',
    '--chat-template',
    'llama3',
    '--max-length',
    '512',
    '--file-group-size',
    '100',
    '--dtype',
    'float32',
    '--device',
    'cpu',
    '--batch-size',
    '4',
    '--cross-check',
    'auto',
    '--selfcheck-samples',
    '2',
    '--selfcheck-final',
    '6',
    '--trust-remote-code',
  ];

  it('renders the job from the extract config, the train draft config and the server trust flag', () => {
    const spec = hfExtractSpec(config, '/srv/aerie/runs/r1/data/train.jsonl', '/srv/aerie/runs/r1/hidden_states');
    expect(renderHfExtractArgv(spec)).toEqual(ARGV);
  });

  it('aerie plan shows the same argv, and launches no extraction server', () => {
    const steps = planRun(config, 'r1');
    const extract = steps.filter((s: PlanStep) => s.stage === 'extract');
    expect(extract.map((s) => s.step)).toEqual([
      'tokenize as SpecForge does, then check free space',
      'transformers forward on the host (detached)',
    ]);
    const job = extract[1]!;
    expect(job.argv).toEqual(ARGV);
    expect(job.env).toEqual({ PYTHONUNBUFFERED: '1' });
    expect(job.notes?.join('\n')).toMatch(/no extraction server/);
    expect(job.notes?.join('\n')).toMatch(/rows_<g>-<g\+100>\/data_<i>\.ckpt/);
    expect(steps.some((s) => s.stage === 'extract' && /server/.test(s.step))).toBe(false);
  });
});

describe('the job log', () => {
  it('reads progress lines, split anywhere, and keeps the latest', () => {
    const a = parseHfProgress('Loading weights ...\n{"aerie_hf_extract": {"phase": "loaded", "done": 0, "total": 6');
    expect(a).toMatchObject({ lines: 1 });
    expect(a.total).toBeUndefined();
    const b = parseHfProgress(
      ', "device": "cpu"}}\n{"aerie_hf_extract": {"phase": "extracting", "done": 4, "total": 6, "ok": 3, "errors": 1, "rate": 0.5}}\n',
      a,
    );
    expect(b).toMatchObject({
      phase: 'extracting',
      done: 4,
      total: 6,
      ok: 3,
      errors: 1,
      rate: 0.5,
      device: 'cpu',
      lines: 3,
    });
    expect(b.partial).toBeUndefined();
  });

  it("takes the job's own set-up refusal as the message, not retried, a ConfigError", () => {
    const f = classifyHfFailure(
      'Traceback...\naerie_hf_extract: error: stages.extract (driver transformers): target.model-path /m cannot be loaded. Fix: point it at the model\n',
    );
    expect(f).toMatchObject({ kind: 'setup', retryable: false });
    expect(f.advice).toMatch(/^stages\.extract \(driver transformers\): target\.model-path \/m/);
    expect(hfFailureType(f)).toBe('ConfigError');
  });

  it("names SpecForge's disagreement, an OOM and a missing module for the extract stage; relaunches a crash", () => {
    const d = classifyHfFailure('aerie_hf_extract: tokens disagree: sample "a": input_ids differ\n');
    expect([d.retryable, hfFailureType(d)]).toEqual([false, 'TokensDisagree']);
    const oom = classifyHfFailure('torch.OutOfMemoryError: CUDA out of memory.\n');
    expect([oom.retryable, hfFailureType(oom)]).toEqual([false, 'OutOfMemoryError']);
    expect(oom.advice).toMatch(/stages\.extract/);
    const missing = classifyHfFailure("ModuleNotFoundError: No module named 'torch'\n");
    expect([missing.retryable, hfFailureType(missing)]).toEqual([false, 'MissingDependencyError']);
    expect(missing.advice).toMatch(/stages\.extract\.python/);
    const crash = classifyHfFailure('Killed\n');
    expect(crash).toMatchObject({ kind: 'crash', retryable: true });
  });
});
