/**
 * The two serving engines side by side: the demo config run twice through `aerie run` (real
 * processes, a real Temporal dev server, the simulator), once served by SGLang (`aerie-sim
 * sglang`) and once by vLLM (`aerie-sim vllm`, its 0.32.0 profile), otherwise alike: both take
 * their hidden states from SpecForge v0.2.0's prepare_hidden_states.py and train with its
 * train_eagle3.py (aerie's capture plugin rides in an SGLang server only), and benchmark over the
 * chat API. Then `aerie compare` on the two.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import YAML from 'yaml';
import { AERIE_HOME } from '../../src/config/load.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { run } from '../support/processes.js';
import { legacyDrivers } from '../support/demo-config.js';
import { useTemporalSuite } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-engines-compare-');
const AERIE = join(AERIE_HOME, 'bin', 'aerie.mjs');

/** The demo config on this test's workdir and a free port, two benchmark levels, one round; only the engine differs. */
async function demoOn(engine: 'sglang' | 'vllm'): Promise<string> {
  const doc = YAML.parse(await readFile(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8')) as Record<string, any>;
  doc.hosts.local.workdir = join(suite.work, 'host');
  doc.server.port = await freePort();
  doc.server.engine = engine;
  if (engine === 'vllm') {
    doc.server.engine = 'vllm';
    doc.server.launcher = ['${AERIE_HOME}/bin/aerie-sim.mjs', 'vllm'];
    // An SGLang setting: the vLLM release is read from the ready server.
    delete doc.server['sglang-version'];
  }
  // SpecForge v0.2.0's scripts, as test/support/demo-config.ts legacyDemoConfig pins them: its
  // prepare_hidden_states.py writes the offline files, its train_eagle3.py trains on them.
  legacyDrivers(doc as { stages: Record<string, Record<string, unknown>> });
  doc.stages.benchmark.api = 'chat';
  doc.stages.benchmark.concurrencies = [1, 4];
  doc.stages.benchmark.rounds = 1;
  doc.stages.benchmark['output-len'] = 32;
  doc.run.label = `engine-${engine}`;
  const path = join(suite.work, `${engine}.yaml`);
  await writeFile(path, YAML.stringify(doc));
  return path;
}

const env = () => ({
  TEMPORAL_ADDRESS: suite.t.server.address,
  TEMPORAL_NAMESPACE: 'default',
  AERIE_STATE_DIR: join(suite.work, 'state'),
});

async function aerieRun(config: string): Promise<{ id: string; out: string }> {
  const r = await run(process.execPath, [AERIE, 'run', config], { cwd: suite.work, env: env(), timeoutMs: 280_000 });
  expect(r.code, r.stdout + r.stderr).toBe(0);
  return { id: /^run (\S+)$/m.exec(r.stdout)![1]!, out: r.stdout };
}

describe('aerie compare: the demo served by SGLang and by vLLM', () => {
  it('runs both to the end and compares them level by level', async () => {
    const sglang = await aerieRun(await demoOn('sglang'));
    const vllm = await aerieRun(await demoOn('vllm'));
    // The vLLM deploy passed its acceptance gate with a figure above 1, and that figure came from
    // vLLM's spec-decode counters: the gate reads /metrics before and after each of its requests
    // (src/activities/server-gate.ts vllmGateSamples, which refuses a server without counters).
    const gate = /acceptance gate: accept length (\d+\.\d+) ≥/.exec(vllm.out);
    expect(gate, vllm.out).not.toBeNull();
    expect(Number(gate![1])).toBeGreaterThan(1);
    const deployLog = await readFile(join(suite.work, 'host', 'runs', vllm.id, 'logs', 'server-deploy-0.log'), 'utf8');
    // The gate's requests go as chat, the way the drafter serves (the benchmark's too).
    const gateRequests = deployLog
      .split('\n')
      .filter((l) => /"POST \/v1\/chat\/completions HTTP\/1\.1" 200/.test(l)).length;
    const metricsReads = deployLog.split('\n').filter((l) => /"GET \/metrics HTTP\/1\.1" 200/.test(l)).length;
    expect(gateRequests).toBeGreaterThanOrEqual(4);
    expect(metricsReads).toBeGreaterThanOrEqual(2 * 4);

    const r = await run(process.execPath, [AERIE, 'compare', sglang.id, vllm.id], {
      cwd: suite.work,
      env: env(),
      timeoutMs: 60_000,
    });
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toContain(sglang.id);
    expect(r.stdout).toContain(vllm.id);
    expect(r.stdout).toMatch(/server\.engine.*sglang.*vllm/);
    expect(r.stdout).toMatch(/server\.launcher/);
    // Both runs were measured on the simulator, and the compare says so for each (vLLM's mark is in /version).
    const servers = r.stdout.split('\n').find((l) => l.includes('Servers'));
    expect(servers, r.stdout).toMatch(/SIMULATED \(aerie-sim[^)]*\).*SIMULATED \(aerie-sim vllm 0\.32\.0\)/);
    // One row per level, each with both runs' speedup and accept length.
    for (const c of [1, 4]) {
      const row = r.stdout.split('\n').find((l) => new RegExp(`^\\|?\\s*${c}\\s*\\|`).test(l));
      expect(row, r.stdout).toBeDefined();
      const cells = row!
        .split('|')
        .map((s) => s.trim())
        .filter(Boolean);
      expect(cells).toHaveLength(5);
      for (const speedup of [cells[1]!, cells[3]!]) expect(speedup).toMatch(/\d+\.\d+×/);
      // vLLM's accept length at every level, from its counters around the level's measured requests.
      expect(cells[4]!).toMatch(/^\d+\.\d+ \/ \d+\.\d+$/);
      // SGLang's over the chat API (seen on this machine: "— / —" at concurrency 4, reported to the lead).
      expect(cells[2]!).toMatch(c === 1 ? /^\d+\.\d+ \/ \d+\.\d+$/ : /^(\d+\.\d+|—) \/ /);
    }
  }, 600_000);
});
