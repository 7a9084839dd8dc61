/**
 * `aerie plan` per SGLang release: every launch is rendered for server.sglang-version (0.5.23
 * shown for auto), and the deploy step says what spec v2 does on that release (S2) — the
 * Kimi example's EAGLE-3 line on 0.5.4, 0.5.9, 0.5.12 and 0.5.23.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { describe, expect, it } from 'vitest';
import { planRun, renderPlan, type PlanStep } from '../../src/cli/plan.js';
import { AERIE_HOME, parseConfigText } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';

/** The Kimi example pinned to a release; extraction through SpecForge's own script, so a release the capture does not support still plans. */
function kimi(pin: string, tweak: (doc: Record<string, any>) => void = () => undefined): Config {
  const doc = YAML.parse(readFileSync(join(AERIE_HOME, 'examples', 'kimi-k2.5.yaml'), 'utf8')) as Record<string, any>;
  doc.server['sglang-version'] = pin;
  doc.stages.extract = {
    driver: 'specforge-offline',
    launcher: ['/opt/venv/bin/torchrun', '--standalone', '/opt/SpecForge/scripts/prepare_hidden_states.py'],
  };
  tweak(doc);
  return parseConfigText(YAML.stringify(doc), 'kimi-k2.5.yaml');
}

const step = (steps: PlanStep[], name: string): PlanStep => steps.find((s) => s.step === name)!;

describe('aerie plan per SGLang release', () => {
  it('the example as written: shown for 0.5.23, spec v2 always on, nothing set for it', () => {
    const c = parseConfigText(readFileSync(join(AERIE_HOME, 'examples', 'kimi-k2.5.yaml'), 'utf8'), 'kimi-k2.5.yaml');
    const d = step(planRun(c, 'r1'), 'launch deploy server');
    expect(d.notes).toContain(
      "for SGLang 0.5.23 (shown; server.sglang-version auto: preflight reads the host's release and every launch follows it)",
    );
    expect(d.notes).toContain('spec v2: always on from SGLang 0.5.15 (this host: 0.5.23); nothing to set');
    expect(d.env?.SGLANG_ENABLE_SPEC_V2).toBeUndefined();
    expect(d.argv).not.toContain('--enable-beta-spec');
    // The old note that called the env var "the overlap scheduler" on every release is gone.
    expect(renderPlan(c, planRun(c, 'r1'), 'kimi-k2.5.yaml')).not.toMatch(
      /spec v2 \(overlap scheduler\): SGLANG_ENABLE_SPEC_V2/,
    );
  });

  it('0.5.12: on by default (env unset); spec-v2: off renders SGLANG_ENABLE_SPEC_V2=False', () => {
    const d = step(planRun(kimi('0.5.12'), 'r1'), 'launch deploy server');
    expect(d.notes).toContain(
      'spec v2 (overlap scheduling of draft and verify): on on SGLang 0.5.12 (SGLANG_ENABLE_SPEC_V2 unset, default True)',
    );
    expect(d.env?.SGLANG_ENABLE_SPEC_V2).toBeUndefined();
    const off = step(
      planRun(
        kimi('0.5.12', (doc) => (doc.stages.deploy['spec-v2'] = 'off')),
        'r1',
      ),
      'launch deploy server',
    );
    expect(off.env?.SGLANG_ENABLE_SPEC_V2).toBe('False');
  });

  it('0.5.9: off by default; on renders the env var; and EAGLE3 on Kimi-K2.5 is named as refused there', () => {
    const d = step(
      planRun(
        kimi('0.5.9', (doc) => (doc.stages.deploy['spec-v2'] = 'on')),
        'r1',
      ),
      'launch deploy server',
    );
    expect(d.env?.SGLANG_ENABLE_SPEC_V2).toBe('True');
    expect(d.notes).toContain(
      'spec v2 (overlap scheduling of draft and verify): on on SGLang 0.5.9 (SGLANG_ENABLE_SPEC_V2=True)',
    );
    expect(d.notes).toContain(
      'refused at preflight for a KimiK25ForConditionalGeneration target (its config.json architectures): EAGLE3 needs a later SGLang for it',
    );
    expect(step(planRun(kimi('0.5.12'), 'r1'), 'launch deploy server').notes?.join('\n')).not.toMatch(
      /refused at preflight/,
    );
  });

  it('0.5.4: --enable-beta-spec on the deploy line only', () => {
    const steps = planRun(
      kimi('0.5.4', (doc) => (doc.stages.deploy['spec-v2'] = 'on')),
      'r1',
    );
    expect(step(steps, 'launch deploy server').argv).toContain('--enable-beta-spec');
    expect(step(steps, 'launch deploy server').notes).toContain(
      'spec v2: on, through --enable-beta-spec (SGLang 0.5.4; off by default there)',
    );
    for (const s of steps.filter((x) => x.step.startsWith('launch ') && x.step !== 'launch deploy server'))
      expect(s.argv).not.toContain('--enable-beta-spec');
  });

  it('shows what the launch will refuse instead of failing the whole plan', () => {
    const c = kimi('0.5.23', (doc) => (doc.server.env.SGLANG_ENABLE_SPEC_V2 = 'True'));
    expect(step(planRun(c, 'r1'), 'launch deploy server').notes?.join('\n')).toMatch(
      /REFUSED at launch: server\.env sets SGLANG_ENABLE_SPEC_V2, which SGLang 0\.5\.23 no longer reads/,
    );
  });

  it('readiness says when /health would not generate on the release and /health_generate is polled instead', () => {
    const env = (doc: Record<string, any>) => (doc.server.env.SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION = 'false');
    expect(step(planRun(kimi('0.5.12', env), 'r1'), 'launch generate server').notes?.join('\n')).toMatch(
      /readiness polls \/health_generate, not server\.readiness\.endpoint \/health/,
    );
    expect(step(planRun(kimi('0.5.4', env), 'r1'), 'launch generate server').notes?.join('\n')).toMatch(
      /which SGLang 0\.5\.4 does not read: \/health still generates/,
    );
  });

  it('extra-args follow the release on every server line', () => {
    const c = kimi(
      '0.5.23',
      (doc) => (doc.server['extra-args'] = ['--trust-remote-code', '--cuda-graph-max-bs', '128']),
    );
    for (const s of planRun(c, 'r1').filter((x) => x.step.startsWith('launch '))) {
      expect(s.argv).toContain('--cuda-graph-max-bs-decode');
      expect(s.argv).not.toContain('--cuda-graph-max-bs');
      expect(s.notes?.join('\n')).toMatch(/--cuda-graph-max-bs is removed in 0\.5\.23/);
    }
    const old = planRun(
      kimi('0.5.12', (doc) => (doc.server['extra-args'] = ['--cuda-graph-max-bs', '128'])),
      'r1',
    );
    expect(step(old, 'launch generate server').argv).toContain('--cuda-graph-max-bs');
  });
  it('a launch the release refuses is a REFUSED note in the plan, not a crash (spec-v2: off on 0.5.23)', () => {
    const c = kimi('0.5.23', (doc) => {
      doc.stages.deploy['spec-v2'] = 'off';
    });
    const d = step(planRun(c, 'r1'), 'launch deploy server');
    expect(d.argv).toBeUndefined();
    expect(d.notes!.filter((n) => n.startsWith('REFUSED at launch: stages.deploy.spec-v2: off'))).toHaveLength(1);
    expect(renderPlan(c, planRun(c, 'r1'), 'kimi-k2.5.yaml')).toContain('REFUSED at launch');
  });
});
