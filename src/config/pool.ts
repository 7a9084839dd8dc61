/**
 * stages.generate.servers, resolved: where each server of a generate pool runs, and the run's
 * config as that server sees it (its host as the target, its port, its GPUs), so every launch,
 * readiness, smoke and stop activity serves a pool server unchanged. Pure and free of zod:
 * the workflow bundle imports it.
 */
import type { Config } from './schema.js';

export interface PoolPlace {
  /** 0-based position in stages.generate.servers: the pool's name for the server. */
  index: number;
  host: string;
  port: number;
  /** The GPU subset; undefined: the host's gpus, else all of them. */
  gpus?: number[];
}

/** The pool's servers, or undefined when the stage runs one server on the target host (today's path). */
export function poolPlaces(config: Config): PoolPlace[] | undefined {
  const servers = config.stages.generate.servers;
  if (!servers) return undefined;
  return servers.map((s, index) => {
    const host = s.host ?? config.target.host;
    const gpus = s.gpus ?? config.hosts[host]?.gpus;
    return { index, host, port: s.port ?? config.server.port, ...(gpus ? { gpus } : {}) };
  });
}

/** The config a pool server's activities get: its host is the target, with its port and GPUs. */
export function placeConfig(config: Config, place: PoolPlace): Config {
  const host = config.hosts[place.host]!;
  return {
    ...config,
    target: { ...config.target, host: place.host },
    server: { ...config.server, port: place.port },
    hosts: { ...config.hosts, [place.host]: place.gpus ? { ...host, gpus: place.gpus } : host },
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
export function poolBatchSize(config: Config, samples: number, servers: number): number {
  const g = config.stages.generate;
  return g['batch-size'] ?? Math.max(8 * g.concurrency, Math.ceil(samples / (16 * servers)), 1);
}
