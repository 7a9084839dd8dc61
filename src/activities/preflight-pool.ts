/**
 * Preflight for a generate pool's servers (stages.generate.servers), beside the target host's
 * own: each server's host reachable, its run folder writable, the server launcher there with
 * the same SGLang release as the target host's (every launch is rendered for that one), the
 * model present, its port free and its GPUs free of foreign processes. The target host's
 * checks already cover a server there on server.port.
 */
import { describePlace, placeConfig, poolPlaces } from '../config/pool.js';
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { runDir } from '../shared.js';
import { checkRelease } from './preflight-capture.js';
import { checkPort, checkReachable, judgeGpus } from './preflight-host.js';
import { checkLauncher } from './preflight-launchers.js';
import type { Findings } from './preflight-probes.js';
import type { SglangRelease } from './server-launches.js';

export async function checkPoolServers(
  hostFor: (config: Config, name: string) => Host,
  config: Config,
  runId: string,
  release: SglangRelease | undefined,
): Promise<Findings> {
  const out: Findings = { checks: [], problems: [] };
  const target = config.target.host;
  const checked = new Set<string>([target]);
  for (const place of poolPlaces(config) ?? []) {
    const field = `stages.generate.servers.${place.index}`;
    const cfg = placeConfig(config, place);
    const host = hostFor(cfg, place.host);
    const mine: Findings = { checks: [], problems: [] };
    if (!checked.has(place.host)) {
      checked.add(place.host);
      if (!(await checkReachable(host, mine))) {
        merge(out, mine, field, place.host);
        continue;
      }
      const root = runDir(host.workdir, runId);
      await host
        .mkdirp(root)
        .then(() => mine.checks.push(`run folder ${root} writable`))
        .catch((err: Error) =>
          mine.problems.push(
            `hosts.${place.host}.workdir: cannot write ${root}: ${err.message}. Fix: choose a workdir the login user can write`,
          ),
        );
      await checkLauncher(host, cfg.server.launcher, 'server.launcher', 'sglang.launch_server', root, mine);
      const theirs = await checkRelease(host, cfg, mine);
      if (theirs && release && theirs.version !== release.version)
        mine.problems.push(
          `SGLang ${theirs.version} on ${place.host}, but ${release.version} on ${target}: the pool's servers are launched for one release. Fix: install ${release.version} there, or leave ${place.host} out of stages.generate.servers`,
        );
      if (!(await host.stat(`${cfg.target['model-path']}/config.json`)))
        mine.problems.push(
          `target.model-path: ${cfg.target['model-path']}/config.json is not on ${place.host}. Fix: copy the model there (same path) or leave ${place.host} out of stages.generate.servers`,
        );
    }
    if (place.host !== target || place.port !== config.server.port)
      await checkPort(host, place.port, `${field}.port`, runId, mine);
    if (place.host !== target) {
      const inv = await host.gpuInventory();
      if (!inv.available) mine.checks.push(`GPU check skipped: ${inv.reason}`);
      else {
        const verdict = judgeGpus(inv, place.gpus, `${field}.gpus`, place.host);
        mine.checks.push(...verdict.checks);
        mine.problems.push(...verdict.problems);
      }
    }
    merge(out, mine, field, describePlace(place));
  }
  return out;
}

function merge(out: Findings, mine: Findings, field: string, where: string): void {
  out.checks.push(...mine.checks.map((c) => `generate server ${where}: ${c}`));
  out.problems.push(
    ...mine.problems.map((p) => (p.startsWith('stages.generate.servers') ? p : `${field} (${where}): ${p}`)),
  );
}
