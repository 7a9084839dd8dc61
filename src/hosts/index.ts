/**
 * The face of src/hosts for the rest of aerie: the Host interface (host.ts), the two hosts,
 * the few protocol pieces activities read themselves, and the Host objects built from config
 * (one per host name per worker, reused by all activities).
 */
import type { Config, HostConfig } from '../config/schema.js';
import type { Host } from './host.js';
import { LocalHost } from './local/index.js';
import { SshHost } from './ssh/index.js';

export type { Host } from './host.js';
export { LocalHost } from './local/index.js';
export { launchPaths, parsePidFile, parseProcStat } from './protocol/index.js';
export { stopRunLaunches } from './run-launches.js';
export { SshConnectError, SshHost, SshTrustError } from './ssh/index.js';
export { shJoin } from './util/index.js';

export function createHost(name: string, cfg: HostConfig): Host {
  switch (cfg.kind) {
    case 'local':
      return new LocalHost({ name, workdir: cfg.workdir, nvidiaSmi: cfg['nvidia-smi'] });
    case 'ssh':
      return new SshHost({
        name,
        workdir: cfg.workdir,
        ssh: cfg.ssh,
        execPrefix: cfg['exec-prefix'],
        httpAddress: cfg['http-address'],
        nvidiaSmi: cfg['nvidia-smi'],
      });
  }
}

export class HostPool {
  private readonly hosts = new Map<string, { key: string; host: Host }>();

  /** The host named in config; a changed definition under the same name gets a fresh Host. */
  get(config: Config, name: string = config.target.host): Host {
    const cfg = config.hosts[name];
    if (!cfg) throw new Error(`no host named "${name}" in config`);
    // The run's GPU subset and task queue are not the connection: a pool's servers on one host
    // (each its own GPUs) share one Host rather than closing each other's.
    const { gpus: _gpus, 'task-queue': _queue, ...connection } = cfg;
    const key = JSON.stringify(connection);
    const cached = this.hosts.get(name);
    if (cached && cached.key === key) return cached.host;
    const host = createHost(name, cfg);
    this.hosts.set(name, { key, host });
    void cached?.host.close();
    return host;
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.hosts.values()].map((h) => h.host.close()));
    this.hosts.clear();
  }
}
