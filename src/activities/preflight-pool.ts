/**
 * Preflight for a stage's pool of servers (stages.generate.servers, stages.extract.servers),
 * beside the target host's own: each server's host reachable, its run folder writable, the
 * server launcher there with the same SGLang release as the target host's (every launch is
 * rendered for that one), the model present, its port free and its GPUs free of foreign
 * processes; and an extraction server's host sees the target's run folder (a file the target
 * writes, read back there). The target host's checks already cover a server there on server.port.
 */
import { randomUUID } from 'node:crypto';
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
  const shared = new Set<string>([target]);
  const pools = (['generate', 'extract'] as const).flatMap((stage) =>
    (poolPlaces(config, stage) ?? []).map((place) => ({ stage, place })),
  );
  for (const { stage, place } of pools) {
    const field = `stages.${stage}.servers.${place.index}`;
    const cfg = placeConfig(config, place, stage);
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
    if (stage === 'extract' && !shared.has(place.host)) {
      shared.add(place.host);
      await checkSharedFolder(hostFor(config, target), host, runDir(host.workdir, runId), mine);
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
  const stage = field.split('.')[1]!;
  out.checks.push(...mine.checks.map((c) => `${stage} server ${where}: ${c}`));
  out.problems.push(
    ...mine.problems.map((p) =>
      /^stages\.\w+\.servers/.test(p) || p.startsWith('hosts.') ? p : `${field} (${where}): ${p}`,
    ),
  );
}

/**
 * An extraction server elsewhere writes the hidden states into the target's run folder, so that
 * host must see it: the target writes a file of its own making there, the other reads it back.
 */
async function checkSharedFolder(target: Host, other: Host, root: string, out: Findings): Promise<void> {
  const path = `${root}/.aerie-shared-${other.name}`;
  const token = `${target.name} ${randomUUID()}\n`;
  try {
    await target.mkdirp(root);
    await target.writeFileAtomic(path, token);
    const seen = await other.readFile(path).then(
      (d) => d.toString('utf8'),
      () => undefined,
    );
    if (seen === token)
      out.checks.push(`sees ${target.name}'s run folder ${root} (a file ${target.name} wrote, read back)`);
    else
      out.problems.push(
        `hosts.${other.name}.shares-files-with: ${other.name} does not see ${path}, which ${target.name} just wrote (${seen === undefined ? 'no such file there' : 'other content there'}). Fix: mount the shared filesystem at the same path on both hosts, or run this extraction server on ${target.name}`,
      );
  } finally {
    await target.remove(path).catch(() => undefined);
  }
}
