/**
 * The whole pipeline on a second SGLang release: the legacy drivers (prepare_hidden_states
 * v0.2.0 and the v0.2 trainer) with servers imitating SGLang 0.5.4, whose surface differs from
 * 0.5.23's (only /get_server_info and /get_model_info, delta output_ids, /health that always
 * generates, spec v2 by flag). Real Temporal, worker, processes and files.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseJsonLine } from '../../src/bench/python-json.js';
import { TASK_QUEUE, type PipelineInput, type PipelineResult } from '../../src/shared.js';
import { pipeline } from '../../src/workflows/index.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { LEGACY_SGLANG, legacyDemoConfig } from '../support/demo-config.js';
import { ALL_STAGES_DONE, stageStates } from '../support/stages.js';
import { useTemporalSuite } from '../support/temporal.js';

const suite = useTemporalSuite('aerie-e2e-legacy-');

describe(`pipeline end to end on SGLang ${LEGACY_SGLANG} (simulated) with the legacy SpecForge drivers`, () => {
  it('runs every stage with every launch rendered for that release, and the servers say they are it', async () => {
    const workdir = join(suite.work, 'legacy');
    const config = legacyDemoConfig(workdir, await freePort());
    const runId = `e2e-legacy-${Date.now()}`;
    const input: PipelineInput = { runId, config, configPath: 'test' };
    const result = (await suite.t.withWorker(() =>
      suite.t.client.workflow.execute(pipeline, { taskQueue: TASK_QUEUE, workflowId: runId, args: [input] }),
    )) as PipelineResult;
    expect(stageStates(result)).toEqual(ALL_STAGES_DONE);

    const procs = join(workdir, '.aerie', 'procs');
    const servers = (await readdir(procs)).filter((f) => f.includes('.server-') && f.endsWith('.json')).sort();
    // prepare_hidden_states runs its own target: only generate and deploy launch SGLang.
    expect(servers).toEqual([`${runId}.server-deploy.0.json`, `${runId}.server-generate.0.json`]);
    for (const f of servers) {
      const { argv } = JSON.parse(await readFile(join(procs, f), 'utf8')) as { argv: string[] };
      expect(argv.slice(0, 4).slice(-3)).toEqual(['sglang', '--version', LEGACY_SGLANG]);
    }

    const results = (await readFile(join(workdir, 'runs', runId, 'bench', 'results.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => parseJsonLine(l) as Record<string, any>);
    expect(results).toHaveLength(6);
    for (const r of results.filter((x) => x.aerie_variant === 'eagle3'))
      expect(r.mean_accept_length_per_request ?? r.accept_length).toBeGreaterThan(1.3);
    // The benchmark asked the server (through 0.5.4's /get_server_info) and followed that release's bench_serving rules.
    for (const r of results)
      expect(r.bench_serving_rules).toBe(`bench_serving ${LEGACY_SGLANG} (server reports sglang ${LEGACY_SGLANG})`);
  }, 300_000);
});
