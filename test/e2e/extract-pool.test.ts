/**
 * The extraction pool end to end: two simulated servers with aerie's capture on GPU subsets
 * of one host (each with its own dump folder), batch by batch into hidden_states/pool/, against
 * a one-server reference of the same run. One server is SIGKILLed mid-stage: its batch goes
 * back to the pool and resumes by sample id. Every sample's SpecForge file holds the same
 * tensors as the reference's, each sample once, and the trainer reads the pool's folder.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Config } from '../../src/config/schema.js';
import type { ProcRecord } from '../../src/hosts/host.js';
import { TASK_QUEUE, type PipelineResult } from '../../src/shared.js';
import { freePort } from '../../src/temporal/dev-server.js';
import { pipeline } from '../../src/workflows/index.js';
import { demoConfig } from '../support/demo-config.js';
import { signalGroup } from '../support/processes.js';
import { pythonOut } from '../support/python.js';
import { useTemporalSuite, waitUntil } from '../support/temporal.js';
import { readFile } from 'node:fs/promises';

const suite = useTemporalSuite('aerie-xpool-', {
  setup: (work) => {
    process.env.AERIE_SIM_GPU_DIR = join(work, 'gpus');
  },
});

async function config(workdir: string, servers: number): Promise<Config> {
  const ports: number[] = [];
  for (let i = 0; i < servers; i++) ports.push(await freePort());
  return demoConfig(workdir, ports[0]!, (c) => {
    c.run['heartbeat-timeout'] = 8000;
    const e = c.stages.extract;
    if (servers > 1 && e.driver === 'patched-server') {
      e.servers = ports.map((port, i) => ({ gpus: [i], port }));
      e['batch-size'] = 16;
    }
  });
}

function start(runId: string, cfg: Config, until: 'extract' | 'train' = 'extract') {
  return suite.t.client.workflow.start(pipeline, {
    taskQueue: TASK_QUEUE,
    workflowId: runId,
    args: [{ runId, config: cfg, configPath: 'test', until }],
  });
}

/**
 * Every sample's SpecForge file under a hidden-states folder, by id (from each layout's
 * index.jsonl): the sha256 of its zip members' bytes, named without the archive's own folder
 * (torch.save names that after the file, and a sample's file number differs between layouts).
 */
const FILES_BY_ID = `
import hashlib, json, os, sys, zipfile
out = {}
for root, _dirs, files in os.walk(sys.argv[1]):
    if 'index.jsonl' not in files:
        continue
    paths = {}
    for r, _d, fs in os.walk(root):
        for f in fs:
            if f.startswith('data_') and f.endswith('.ckpt'):
                paths[int(f[5:-5])] = os.path.join(r, f)
    for line in open(os.path.join(root, 'index.jsonl')):
        if not line.strip():
            continue
        e = json.loads(line)
        h = hashlib.sha256()
        with zipfile.ZipFile(paths[e['i']]) as z:
            for n in sorted(z.namelist(), key=lambda n: n.split('/', 1)[1]):
                h.update(n.split('/', 1)[1].encode() + b'\\0' + z.read(n))
        if e['id'] in out:
            sys.exit('sample %s twice' % e['id'])
        out[e['id']] = h.hexdigest()
print(json.dumps(out, sort_keys=True))
`;
const filesById = (hidden: string) => JSON.parse(pythonOut(FILES_BY_ID, [hidden])) as Record<string, string>;
const hiddenDir = (workdir: string, runId: string) => join(workdir, 'runs', runId, 'hidden_states');

async function batchesWithFiles(hidden: string): Promise<number> {
  let n = 0;
  for (const b of await readdir(join(hidden, 'pool')).catch(() => [] as string[])) {
    if (!/^b-\d+$/.test(b)) continue;
    const index = await readFile(join(hidden, 'pool', b, 'index.jsonl'), 'utf8').catch(() => '');
    if (index.trim() !== '') n++;
  }
  return n;
}

describe('an extraction pool of two capture servers', () => {
  it('loses one server mid-stage and still writes every sample once, with the one-server tensors', async () => {
    const refDir = join(suite.work, 'ref');
    const refId = `xpool-ref-${Date.now()}`;
    const poolDir = join(suite.work, 'pool');
    const runId = `xpool-${Date.now()}`;
    const result = await suite.t.withWorker(async () => {
      const ref = (await (await start(refId, await config(refDir, 1))).result()) as PipelineResult;
      expect(ref.stages.find((s) => s.stage === 'extract')?.state).toBe('done');
      const h = await start(runId, await config(poolDir, 2), 'train');
      await waitUntil(
        async () => (await batchesWithFiles(hiddenDir(poolDir, runId))) >= 2,
        'two batches under way',
        180_000,
      );
      const victim = JSON.parse(
        await readFile(join(poolDir, '.aerie', 'procs', `${runId}.server-extract-s1.0.json`), 'utf8'),
      ) as ProcRecord;
      signalGroup(victim.pgid, 'SIGKILL');
      return (await h.result()) as PipelineResult;
    });
    const extract = result.stages.find((s) => s.stage === 'extract')!;
    expect(extract.state).toBe('done');
    expect(extract.note).toMatch(/^96 of 96 samples, .* \(aerie's capture, 6 batches\).* on 2 servers$/);
    // SpecForge's trainer walks the folder: the batches' files are its dataset as they lie.
    expect(result.stages.find((s) => s.stage === 'train')?.state).toBe('done');
    const ref = filesById(hiddenDir(refDir, refId));
    expect(Object.keys(ref)).toHaveLength(96);
    expect(filesById(hiddenDir(poolDir, runId))).toEqual(ref);
    const launches = (await readdir(join(poolDir, '.aerie', 'procs'))).filter(
      (f) => f.startsWith(`${runId}.server-extract-s`) && f.endsWith('.json'),
    );
    expect(launches.sort()).toEqual([
      `${runId}.server-extract-s0.0.json`,
      `${runId}.server-extract-s1.0.json`,
      `${runId}.server-extract-s1.1.json`,
    ]);
  }, 600_000);
});
