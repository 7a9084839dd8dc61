/**
 * stages.<generate|extract>.servers, resolved: where each server of a stage's pool runs, and
 * the run's config as that server sees it (its host as the target, its port, its GPUs, and
 * for extraction a dump folder of its own), so every launch, readiness, smoke and stop
 * activity serves a pool server unchanged. Pure and free of zod: the workflow bundle imports it.
 */
import type { Config } from './schema.js';

export type PoolStage = 'generate' | 'extract';

export interface PoolPlace {
  /** 0-based position in the stage's servers: the pool's name for the server (slot s<index>). */
  index: number;
  host: string;
  port: number;
  /** The GPU subset; undefined: the host's gpus, else all of them. */
  gpus?: number[];
}

type PoolServers = { host?: string; gpus?: number[]; port?: number }[] | undefined;

function stageServers(config: Config, stage: PoolStage): PoolServers {
  if (stage === 'generate') return config.stages.generate.servers;
  const e = config.stages.extract;
  return e.driver === 'patched-server' ? e.servers : undefined;
}

/** The stage's pool, or undefined when it runs one server on the target host. */
export function poolPlaces(config: Config, stage: PoolStage = 'generate'): PoolPlace[] | undefined {
  const servers = stageServers(config, stage);
  if (!servers) return undefined;
  return servers.map((s, index) => {
    const host = s.host ?? config.target.host;
    const gpus = s.gpus ?? config.hosts[host]?.gpus;
    return { index, host, port: s.port ?? config.server.port, ...(gpus ? { gpus } : {}) };
  });
}

/**
 * The config a pool server's activities get: its host is the target, with its port and GPUs.
 * An extraction server also gets its own dump folder: servers on one host share its RAM disk,
 * and each batch clears what it finds in its folder as an earlier attempt's leftovers.
 */
export function placeConfig(config: Config, place: PoolPlace, stage: PoolStage = 'generate'): Config {
  const host = config.hosts[place.host]!;
  const e = config.stages.extract;
  const extract =
    stage === 'extract' && e.driver === 'patched-server'
      ? { ...e, 'dump-dir': `${e['dump-dir'].replace(/\/+$/, '')}/s${place.index}` }
      : e;
  return {
    ...config,
    target: { ...config.target, host: place.host },
    server: { ...config.server, port: place.port },
    hosts: { ...config.hosts, [place.host]: place.gpus ? { ...host, gpus: place.gpus } : host },
    stages: { ...config.stages, extract },
  };
}

export function describePlace(p: PoolPlace): string {
  return `${p.host}:${p.port}${p.gpus ? ` GPUs ${p.gpus.join(',')}` : ''}`;
}

/**
 * Samples per batch: at least 8 × concurrency, so a server's requests overlap well inside a
 * batch, and about 16 batches per server, so the last ones even out across the pool while a
 * 100k-sample run stays a few hundred activities.
 */
export function poolBatchSize(config: Config, samples: number, servers: number, stage: PoolStage = 'generate'): number {
  const e = config.stages.extract;
  const s =
    stage === 'generate'
      ? config.stages.generate
      : e.driver === 'patched-server'
        ? e
        : { concurrency: 1, 'batch-size': undefined };
  return s['batch-size'] ?? Math.max(8 * s.concurrency, Math.ceil(samples / (16 * servers)), 1);
}
