// run.lease-ttl against run.heartbeat-timeout: a TTL a replaced worker cannot renew within is refused;
// unset, the TTL follows the heartbeat timeout up.
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { leaseTtl } from '../../src/activities/leases.js';
import { configProblems } from '../support/config-problems.js';

const minimal = (run: string) => `
hosts:
  gpu: { kind: local, workdir: /srv/aerie }
target: { model-path: /models/llama, host: gpu }
run: { ${run} }
stages:
  generate: { input: /data/prompts.jsonl }
  extract: { driver: specforge-offline }
  train: { draft-model-config: /cfg/draft.json }
`;

const problems = (text: string) => configProblems(text);

describe('run.lease-ttl', () => {
  it('refuses a TTL at or below the heartbeat timeout, naming the field and the fix', () => {
    expect(problems(minimal('lease-ttl: 30s, heartbeat-timeout: 30s'))).toEqual([
      'run.lease-ttl: must exceed run.heartbeat-timeout (30s): a worker replaced mid-run renews only after the heartbeat timeout. Fix: raise run.lease-ttl or lower run.heartbeat-timeout',
    ]);
    expect(problems(minimal('lease-ttl: 31s, heartbeat-timeout: 30s'))).toEqual([]);
  });

  it('unset, is 120 s or four heartbeat timeouts, whichever is longer', () => {
    expect(leaseTtl(parseConfigText(minimal('label: a'), 't.yaml', {}))).toBe(120_000);
    expect(leaseTtl(parseConfigText(minimal('heartbeat-timeout: 60s'), 't.yaml', {}))).toBe(240_000);
    expect(leaseTtl(parseConfigText(minimal('lease-ttl: 45s'), 't.yaml', {}))).toBe(45_000);
  });
});
