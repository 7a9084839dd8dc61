// stages.generate.servers: each server names a host, stays within the GPUs that host lets the run
// use, and shares neither a port nor a GPU with another server on the same host; resolved, each
// server's config is the run aimed at it.
import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load.js';
import { placeConfig, poolBatchSize, poolPlaces } from '../../src/config/pool.js';
import { inputsHash } from '../../src/ledger/record.js';
import { configProblems } from '../support/config-problems.js';

const minimal = (generate: string) => `
hosts:
  gpu-a: { kind: local, workdir: /srv/aerie, gpus: [0, 1, 2, 3] }
  gpu-b: { kind: local, workdir: /srv/other }
target: { model-path: /models/llama, host: gpu-a }
server: { port: 30000 }
stages:
  generate: { input: /data/prompts.jsonl, concurrency: 8, ${generate} }
  extract: { driver: specforge-offline }
  train: { draft-model-config: /cfg/draft.json }
`;

describe('stages.generate.servers', () => {
  it('refuses unknown hosts, GPUs outside the host, shared ports and shared GPUs, naming the server', () => {
    expect(
      configProblems(
        minimal(
          'servers: [{ gpus: [0, 1] }, { gpus: [1, 5], port: 30001 }, { host: gpu-c }, { host: gpu-b }, { host: gpu-b, port: 30002 }]',
        ),
      ),
    ).toEqual([
      'stages.generate.servers.1.gpus: GPU 5 is not among hosts.gpu-a.gpus (0, 1, 2, 3); use only those, or widen hosts.gpu-a.gpus',
      'stages.generate.servers.1.gpus: shares GPU 1 with servers.0 on gpu-a; give each server on one host its own GPUs (servers.N.gpus)',
      'stages.generate.servers.2.host: names no host: "gpu-c" is not one of hosts (gpu-a, gpu-b)',
      'stages.generate.servers.4.gpus: shares its GPUs with servers.3 on gpu-b; give each server on one host its own GPUs (servers.N.gpus)',
    ]);
    expect(configProblems(minimal('servers: [{ gpus: [0] }, { gpus: [1] }]'))).toEqual([
      "stages.generate.servers.1.port: gpu-a:30000 is also servers.0's port; give each server on one host its own port",
    ]);
    expect(configProblems(minimal('batch-size: 100'))).toEqual([
      'stages.generate.batch-size: applies only to a pool of servers: set stages.generate.servers too, or remove batch-size',
    ]);
  });

  it('resolves each server to the run aimed at it; the pool is not an input of the stage', () => {
    const text = minimal('servers: [{ gpus: [0, 1] }, { gpus: [2, 3], port: 30001 }, { host: gpu-b }]');
    const config = parseConfigText(text, 't.yaml', {});
    const places = poolPlaces(config)!;
    expect(places).toEqual([
      { index: 0, host: 'gpu-a', port: 30000, gpus: [0, 1] },
      { index: 1, host: 'gpu-a', port: 30001, gpus: [2, 3] },
      { index: 2, host: 'gpu-b', port: 30000 },
    ]);
    const second = placeConfig(config, places[1]!);
    expect([second.target.host, second.server.port, second.hosts['gpu-a']!.gpus]).toEqual(['gpu-a', 30001, [2, 3]]);
    expect(config.hosts['gpu-a']!.gpus).toEqual([0, 1, 2, 3]);
    expect(placeConfig(config, places[2]!).target.host).toBe('gpu-b');
    const alone = parseConfigText(minimal('temperature: 0.7'), 't.yaml', {});
    expect(poolPlaces(alone)).toBeUndefined();
    // Same data whatever the pool: a finished generate is not redone because servers were added.
    expect(inputsHash(config, 'generate', [])).toBe(inputsHash(alone, 'generate', []));
  });

  it('sizes batches at 8 × concurrency or about 16 per server, whichever is larger', () => {
    const config = parseConfigText(minimal('servers: [{ host: gpu-b }]'), 't.yaml', {});
    expect(poolBatchSize(config, 100, 4)).toBe(64);
    expect(poolBatchSize(config, 100_000, 4)).toBe(1563);
  });
});

describe('stages.extract.servers', () => {
  const extractPool = (hostB: string, servers: string) => `
hosts:
  gpu-a: { kind: local, workdir: /srv/aerie, gpus: [0, 1, 2, 3] }
  gpu-b: { kind: local, ${hostB} }
target: { model-path: /models/llama, host: gpu-a }
server: { port: 30000 }
stages:
  generate: { input: /data/prompts.jsonl }
  extract: { driver: patched-server, concurrency: 4, servers: ${servers} }
  train: { draft-model-config: /cfg/draft.json }
`;

  it('a server off the target host needs a host that shares its files, at the same workdir', () => {
    expect(configProblems(extractPool('workdir: /srv/aerie', '[{ gpus: [0] }, { host: gpu-b }]'))).toEqual([
      "stages.extract.servers.1.host: gpu-b would write the hidden states onto gpu-a's disk, which it must see: set hosts.gpu-b.shares-files-with: gpu-a (a shared filesystem, checked by preflight), or run this server on gpu-a",
    ]);
    expect(
      configProblems(extractPool('workdir: /srv/b, shares-files-with: gpu-a', '[{ gpus: [0] }, { host: gpu-b }]')),
    ).toEqual([
      "hosts.gpu-b.workdir: must be gpu-a's workdir (/srv/aerie): the shared run folders are read at the same path on both hosts",
    ]);
    expect(
      configProblems(extractPool('workdir: /srv/aerie, shares-files-with: gpu-a', '[{ gpus: [0] }, { host: gpu-b }]')),
    ).toEqual([]);
  });

  it('gives each extraction server a dump folder of its own; batches sized from the extract concurrency', () => {
    const config = parseConfigText(
      extractPool('workdir: /srv/aerie, shares-files-with: gpu-a', '[{ gpus: [0] }, { gpus: [1], port: 30001 }]'),
      't.yaml',
      {},
    );
    const places = poolPlaces(config, 'extract')!;
    expect(places.map((p) => [p.host, p.port, p.gpus])).toEqual([
      ['gpu-a', 30000, [0]],
      ['gpu-a', 30001, [1]],
    ]);
    const dumps = places.map((p) => {
      const e = placeConfig(config, p, 'extract').stages.extract;
      return e.driver === 'patched-server' ? e['dump-dir'] : undefined;
    });
    expect(dumps).toEqual(['/dev/shm/aerie-hs/s0', '/dev/shm/aerie-hs/s1']);
    expect(poolPlaces(config, 'generate')).toBeUndefined();
    expect(poolBatchSize(config, 1000, 2, 'extract')).toBe(32);
  });
});
