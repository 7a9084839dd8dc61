import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { AERIE_HOME, ConfigError, configJsonSchema, parseConfigText } from '../../src/config/load.js';

const demo = readFileSync(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8');

function problemsOf(text: string, env: NodeJS.ProcessEnv = {}): string[] {
  try {
    parseConfigText(text, 'test.yaml', env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

const minimal = `
hosts:
  gpu: { kind: local, workdir: /srv/aerie }
target: { model-path: /models/llama, host: gpu }
stages:
  generate: { input: /data/prompts.jsonl }
  extract: { dump-dir: /dev/shm/sglang_hs }
  train: { draft-model-config: /cfg/draft.json }
`;

describe('config loading', () => {
  it('loads the demo config with defaults filled in and ${AERIE_HOME} expanded', () => {
    const cfg = parseConfigText(demo, 'demo.yaml', {});
    expect(cfg.target['model-path']).toBe(join(AERIE_HOME, 'examples/models/sim-llama-8b'));
    expect(cfg.stages.deploy['speculative-algorithm']).toBe('EAGLE3');
    expect(cfg.server.readiness['poll-interval']).toBe(250);
    expect(cfg.server.readiness.budget).toBe(120_000);
    expect(cfg.stages.benchmark.concurrencies).toEqual([1, 2, 5, 10, 30, 70, 100, 250]);
  });

  it('fills researcher-facing defaults for a minimal config', () => {
    const cfg = parseConfigText(minimal, 'min.yaml', {});
    expect(cfg.server.launcher).toEqual(['python3', '-m', 'sglang.launch_server']);
    expect(cfg.server.readiness).toEqual({ endpoint: '/health', 'require-ready-line': true, 'poll-interval': 2000, budget: 1_200_000, 'smoke-tokens': 8 });
    expect(cfg.stages.deploy['acceptance-threshold']).toBe(1.3);
  });

  it('run.heartbeat-timeout: 30 s by default, a duration, and refused below 5 s with the field and the fix', () => {
    expect(parseConfigText(minimal, 'min.yaml', {}).run['heartbeat-timeout']).toBe(30_000);
    expect(parseConfigText(`run: { heartbeat-timeout: 10s }\n${minimal}`, 'min.yaml', {}).run['heartbeat-timeout']).toBe(10_000);
    expect(parseConfigText(`run: { heartbeat-timeout: 5s }\n${minimal}`, 'min.yaml', {}).run['heartbeat-timeout']).toBe(5_000);
    expect(problemsOf(`run: { heartbeat-timeout: 2s }\n${minimal}`)).toEqual([
      expect.stringMatching(/^run\.heartbeat-timeout: must be at least 5s: workers heartbeat every 1 s.*Fix: set run\.heartbeat-timeout to "5s" or more \(default "30s"\)$/),
    ]);
    expect(problemsOf(`run: { heartbeat-timeout: soon }\n${minimal}`)).toEqual([expect.stringMatching(/^run\.heartbeat-timeout: .*a duration like "2s"/)]);
  });

  it('reports five mistakes as five errors, each with its field path', () => {
    const bad = minimal
      .replace('target: { model-path: /models/llama, host: gpu }', 'target: { model-path: /models/llama, host: gpu-b }')
      .replace('generate: { input: /data/prompts.jsonl }', 'generate: { input: /data/prompts.jsonl, temprature: 0.7, concurrency: -4 }')
      .replace('train: { draft-model-config: /cfg/draft.json }', 'train: { draft-model-config: /cfg/draft.json, num-epochs: "two" }')
      .replace('hosts:', 'server: { port: 99999 }\nhosts:');
    const problems = problemsOf(bad);
    expect(problems).toHaveLength(5);
    const text = problems.join('\n');
    expect(text).toMatch(/^server\.port: /m);
    expect(text).toMatch(/^stages\.generate\.temprature: unknown key — did you mean "temperature"\?/m);
    expect(text).toMatch(/^stages\.generate\.concurrency: /m);
    expect(text).toMatch(/^stages\.train\.num-epochs: /m);
    expect(text).toMatch(/^target\.host: names no host: "gpu-b"/m);
  });

  it('rejects unknown keys at every level and lists the allowed ones', () => {
    const problems = problemsOf(minimal + 'extra-top: 1\n');
    expect(problems).toEqual([expect.stringMatching(/^extra-top: unknown key \(expected one of: run, hosts, target, server, stages\)/)]);
  });

  it('refuses EAGLE with the EAGLE-3 drafter the train stage produces, naming both and the fix', () => {
    const problems = problemsOf(minimal + '  deploy: { speculative-algorithm: EAGLE }\n');
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^stages\.deploy\.speculative-algorithm: EAGLE cannot serve the EAGLE-3 drafter \(LlamaForCausalLMEagle3\)/);
    expect(problems[0]).toContain('set speculative-algorithm: EAGLE3');
  });

  it('refuses a forward to a container address while the server would listen on loopback', () => {
    const ssh = minimal.replace(
      'gpu: { kind: local, workdir: /srv/aerie }',
      'gpu: { kind: ssh, ssh: { host: box }, exec-prefix: [pct, exec, "129", "--"], http-address: 192.0.2.7, workdir: /srv/aerie }',
    );
    const problems = problemsOf(ssh);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^server\.listen-host: is 127\.0\.0\.1, but hosts\.gpu\.http-address forwards to 192\.0\.2\.7/);
    expect(problems[0]).toContain('Set server.listen-host to 192.0.2.7 (or 0.0.0.0)');
    const fixed = parseConfigText(ssh + 'server: { listen-host: 0.0.0.0 }\n', 'ok.yaml', {});
    expect(fixed.server['listen-host']).toBe('0.0.0.0');
    const host = fixed.hosts.gpu!;
    expect(host.kind === 'ssh' && host['http-address']).toBe('192.0.2.7');
  });

  it('names a missing required section', () => {
    const problems = problemsOf('hosts: {}\n');
    expect(problems).toEqual(expect.arrayContaining([expect.stringMatching(/^target: required/), expect.stringMatching(/^stages: required/)]));
  });

  it('reports an unset ${VAR} with its field path, but leaves env values for launch time', () => {
    const text = minimal.replace('/data/prompts.jsonl', '"${DATA_ROOT}/prompts.jsonl"') + 'server:\n  env: { HF_TOKEN: "${HF_TOKEN}" }\n';
    expect(problemsOf(text)).toEqual(['stages.generate.input: refers to ${DATA_ROOT}, which is not set in the environment (set it, or write the value)']);
    const cfg = parseConfigText(text, 't.yaml', { DATA_ROOT: '/d', HF_TOKEN: 'secret-value' });
    expect(cfg.stages.generate.input).toBe('/d/prompts.jsonl');
    expect(cfg.server.env.HF_TOKEN).toBe('${HF_TOKEN}');
  });

  it('reports YAML syntax errors with a line number', () => {
    expect(problemsOf('hosts: [unclosed\n')[0]).toMatch(/^YAML syntax: .*line \d+/);
  });

  it('exports a JSON Schema that rejects unknown keys and documents fields', () => {
    const schema = configJsonSchema() as { properties: Record<string, any>; additionalProperties: boolean };
    expect(schema.additionalProperties).toBe(false);
    expect(Object.keys(schema.properties)).toEqual(['run', 'hosts', 'target', 'server', 'stages']);
    const deploy = schema.properties.stages.properties.deploy;
    expect(deploy.properties['speculative-algorithm'].enum).toContain('EAGLE3');
  });
});
