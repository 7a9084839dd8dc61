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
  extract: { driver: specforge-offline }
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
    expect(cfg.server.readiness).toEqual({
      endpoint: '/health',
      'require-ready-line': true,
      'poll-interval': 2000,
      budget: 1_200_000,
      'smoke-tokens': 8,
    });
    expect(cfg.stages.deploy['acceptance-threshold']).toBe(1.3);
  });

  it('run.heartbeat-timeout: 30 s by default, a duration, and refused below 5 s with the field and the fix', () => {
    expect(parseConfigText(minimal, 'min.yaml', {}).run['heartbeat-timeout']).toBe(30_000);
    expect(
      parseConfigText(`run: { heartbeat-timeout: 10s }\n${minimal}`, 'min.yaml', {}).run['heartbeat-timeout'],
    ).toBe(10_000);
    expect(parseConfigText(`run: { heartbeat-timeout: 5s }\n${minimal}`, 'min.yaml', {}).run['heartbeat-timeout']).toBe(
      5_000,
    );
    expect(problemsOf(`run: { heartbeat-timeout: 2s }\n${minimal}`)).toEqual([
      expect.stringMatching(
        /^run\.heartbeat-timeout: must be at least 5s: workers heartbeat every 1 s.*Fix: set run\.heartbeat-timeout to "5s" or more \(default "30s"\)$/,
      ),
    ]);
    expect(problemsOf(`run: { heartbeat-timeout: soon }\n${minimal}`)).toEqual([
      expect.stringMatching(/^run\.heartbeat-timeout: .*a duration like "2s"/),
    ]);
  });

  it('reports five mistakes as five errors, each with its field path', () => {
    const bad = minimal
      .replace('target: { model-path: /models/llama, host: gpu }', 'target: { model-path: /models/llama, host: gpu-b }')
      .replace(
        'generate: { input: /data/prompts.jsonl }',
        'generate: { input: /data/prompts.jsonl, temprature: 0.7, concurrency: -4 }',
      )
      .replace(
        'train: { draft-model-config: /cfg/draft.json }',
        'train: { draft-model-config: /cfg/draft.json, num-epochs: "two" }',
      )
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
    expect(problems).toEqual([
      expect.stringMatching(/^extra-top: unknown key \(expected one of: run, hosts, target, server, stages\)/),
    ]);
  });

  it('refuses EAGLE with the EAGLE-3 drafter the train stage produces, naming both and the fix', () => {
    const problems = problemsOf(minimal + '  deploy: { speculative-algorithm: EAGLE }\n');
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^stages\.deploy\.speculative-algorithm: EAGLE cannot serve the EAGLE-3 drafter \(LlamaForCausalLMEagle3\)/,
    );
    expect(problems[0]).toContain('set speculative-algorithm: EAGLE3');
  });

  it('refuses a forward to a container address while the server would listen on loopback', () => {
    const ssh = minimal.replace(
      'gpu: { kind: local, workdir: /srv/aerie }',
      'gpu: { kind: ssh, ssh: { host: box }, exec-prefix: [pct, exec, "129", "--"], http-address: 192.0.2.7, workdir: /srv/aerie }',
    );
    const problems = problemsOf(ssh);
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(
      /^server\.listen-host: is 127\.0\.0\.1, but hosts\.gpu\.http-address forwards to 192\.0\.2\.7/,
    );
    expect(problems[0]).toContain('Set server.listen-host to 192.0.2.7 (or 0.0.0.0)');
    const fixed = parseConfigText(ssh + 'server: { listen-host: 0.0.0.0 }\n', 'ok.yaml', {});
    expect(fixed.server['listen-host']).toBe('0.0.0.0');
    const host = fixed.hosts.gpu!;
    expect(host.kind === 'ssh' && host['http-address']).toBe('192.0.2.7');
  });

  it('names a missing required section', () => {
    const problems = problemsOf('hosts: {}\n');
    expect(problems).toEqual(
      expect.arrayContaining([expect.stringMatching(/^target: required/), expect.stringMatching(/^stages: required/)]),
    );
  });

  it('reports an unset ${VAR} with its field path, but leaves env values for launch time', () => {
    const text =
      minimal.replace('/data/prompts.jsonl', '"${DATA_ROOT}/prompts.jsonl"') +
      'server:\n  env: { HF_TOKEN: "${HF_TOKEN}" }\n';
    expect(problemsOf(text)).toEqual([
      'stages.generate.input: refers to ${DATA_ROOT}, which is not set in the environment (set it, or write the value)',
    ]);
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

  it('trains with the current SpecForge CLI by default, revision detected at preflight', () => {
    const t = parseConfigText(minimal, 'min.yaml', {}).stages.train;
    expect(t.driver).toBe('specforge');
    if (t.driver !== 'specforge') throw new Error('unreachable');
    expect(t['specforge-revision']).toBe('auto');
    expect(t['target-backend']).toBe('sglang');
    expect(t.launcher).toEqual(['specforge']);
  });

  it('D1: the CLI trains offline from either extract driver, so no config asks it to train online', () => {
    const patched = minimal.replace(
      'extract: { driver: specforge-offline }',
      'extract: { dump-dir: /dev/shm/aerie-hs }',
    );
    const c = parseConfigText(patched, 'x.yaml', {});
    expect(c.stages.extract.driver).toBe('patched-server');
    expect(c.stages.train.driver).toBe('specforge');
  });

  it("refuses dump-env, naming S1 and aerie's own capture as the fix", () => {
    const old = minimal.replace(
      'extract: { driver: specforge-offline }',
      'extract: { dump-env: SGLANG_HS_DUMP_DIR, dump-dir: /dev/shm/sglang_hs }',
    );
    const [p, ...rest] = problemsOf(old);
    expect(rest).toEqual([]);
    expect(p).toMatch(
      /^stages\.extract\.dump-env: dump-env is gone: SGLANG_HS_DUMP_DIR exists in no SGLang release \(conformance\.md S1\)/,
    );
    expect(p).toContain('Fix: delete stages.extract.dump-env');
  });

  it('D1: overrides cannot switch the CLI to the disaggregated online deployment, nor move what aerie manages', () => {
    const withOverrides = (o: string) =>
      minimal.replace(
        'train: { draft-model-config: /cfg/draft.json }',
        `train: { draft-model-config: /cfg/draft.json, overrides: { ${o} } }`,
      );
    expect(
      problemsOf(
        withOverrides(
          'deployment.mode: disaggregated, deployment.disaggregated.backend: mooncake, training.role: auto',
        ),
      ),
    ).toEqual([
      expect.stringMatching(
        /^stages\.train\.overrides\.deployment\.mode: selects SpecForge's disaggregated online deployment, which aerie does not drive/,
      ),
      expect.stringMatching(/^stages\.train\.overrides\.deployment\.disaggregated\.backend: selects/),
      expect.stringMatching(/^stages\.train\.overrides\.training\.role: selects/),
    ]);
    expect(problemsOf(withOverrides('data.train_data_path: /d.jsonl, model.vocab_mapping_path: /v.pt'))).toEqual([
      expect.stringMatching(/^stages\.train\.overrides\.data\.train_data_path: is set by aerie/),
      expect.stringMatching(/^stages\.train\.overrides\.model\.vocab_mapping_path: is set by aerie/),
    ]);
    expect(() => parseConfigText(withOverrides('deployment.trainer.nproc_per_node: 8'), 'x.yaml', {})).not.toThrow();
  });

  it('D2: target-backend hf or custom (an old config) is refused with the fix; sglang is accepted', () => {
    for (const backend of ['hf', 'custom']) {
      expect(
        problemsOf(
          minimal.replace(
            'train: { draft-model-config: /cfg/draft.json }',
            `train: { draft-model-config: /cfg/draft.json, target-backend: ${backend} }`,
          ),
        ),
      ).toEqual([
        `stages.train.target-backend: SpecForge accepts only "sglang" since the server-only runtime (2026-07): "${backend}" fails its config validation. Fix: remove target-backend (the default is sglang)`,
      ]);
    }
    expect(() =>
      parseConfigText(
        minimal.replace(
          'draft-model-config: /cfg/draft.json }',
          'draft-model-config: /cfg/draft.json, target-backend: sglang }',
        ),
        'x.yaml',
        {},
      ),
    ).not.toThrow();
  });

  it('specforge-revision: each driver takes only its own revisions, and the error names the field and the fix', () => {
    const pin = (driver: string, rev: string) =>
      minimal.replace(
        'train: { draft-model-config: /cfg/draft.json }',
        `train: { driver: ${driver}, specforge-revision: ${rev}, draft-model-config: /cfg/draft.json }`,
      );
    expect(problemsOf(pin('specforge', 'v0.2-resume'))).toEqual([
      expect.stringMatching(
        /^stages\.train\.specforge-revision: "v0\.2-resume" names the v0\.2 scripts.*Fix: set stages\.train\.driver: specforge-v0\.2/,
      ),
    ]);
    expect(problemsOf(pin('specforge-v0.2', 'cli'))).toEqual([
      expect.stringMatching(
        /^stages\.train\.specforge-revision: "cli" is the current specforge CLI.*Fix: set stages\.train\.driver: specforge/,
      ),
    ]);
    expect(problemsOf(pin('specforge', 'v9'))).toEqual([
      'stages.train.specforge-revision: must be auto or cli (a6b6b023 / PyPI specforge 0.2.0)',
    ]);
    for (const rev of ['auto', 'v0.2.0', 'v0.2-final-save', 'v0.2-resume'])
      expect(() => parseConfigText(pin('specforge-v0.2', rev), 'x.yaml', {})).not.toThrow();
    expect(() => parseConfigText(pin('specforge', 'cli'), 'x.yaml', {})).not.toThrow();
  });

  it("every example loads, and the two real-cluster ones train with SpecForge from aerie's capture", () => {
    for (const name of ['demo.yaml', 'demo-ssh.yaml', 'llama3.1-8b.yaml', 'kimi-k2.5.yaml']) {
      const text = readFileSync(join(AERIE_HOME, 'examples', name), 'utf8');
      expect(() => parseConfigText(text, name, { HF_TOKEN: 'x' }), name).not.toThrow();
    }
    for (const name of ['kimi-k2.5.yaml', 'llama3.1-8b.yaml']) {
      const c = parseConfigText(readFileSync(join(AERIE_HOME, 'examples', name), 'utf8'), name, { HF_TOKEN: 'x' });
      expect([c.stages.extract.driver, c.stages.train.driver], name).toEqual(['patched-server', 'specforge']);
    }
  });
});

describe('the extract driver when none is named', () => {
  const cfg = (extract: string) => `
hosts: { gpu: { kind: local, workdir: /srv/aerie } }
target: { model-path: /models/llama, host: gpu }
stages:
  generate: { input: /data/prompts.jsonl }
  extract: ${extract}
  train: { driver: specforge-v0.2, draft-model-config: /cfg/draft.json }
`;
  it("is SpecForge's offline extraction, the one the default trainer reads", () => {
    expect(parseConfigText(cfg('{ chat-template: llama3 }'), 't', {}).stages.extract.driver).toBe('specforge-offline');
  });
  it('is the patched server for a section that sets its dump-dir (configs written before the CLI default)', () => {
    expect(parseConfigText(cfg('{ dump-dir: /dev/shm/x }'), 't', {}).stages.extract.driver).toBe('patched-server');
  });
});
