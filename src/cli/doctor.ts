/**
 * `aerie doctor <config>`: the preflight checks, run directly against the config's target
 * host (no Temporal, no run started), printed one line each. Exit 1 when anything is wrong.
 */
import { loadConfigFile } from '../config/load.js';
import { runPreflight, type PreflightReport } from '../activities/preflight.js';
import { poolPlaces } from '../config/pool.js';
import { HostPool } from '../hosts/index.js';
import { runDir } from '../shared.js';
import { profileBehaviours, SPECFORGE_PROFILES } from '../stages/common/index.js';

export function renderDoctorReport(report: PreflightReport): string {
  const lines = [`aerie doctor: host ${report.host}`];
  for (const c of report.checks) lines.push(`  ok       ${c}`);
  for (const p of report.problems) lines.push(`  PROBLEM  ${p}`);
  if (report.specforge) {
    const { profile, evidence } = report.specforge;
    lines.push(`SpecForge on ${report.host}: ${SPECFORGE_PROFILES[profile].label} [${profile}] (${evidence})`);
    for (const b of profileBehaviours(profile)) lines.push(`  ${b}`);
  }
  lines.push(
    report.problems.length === 0
      ? 'no problems found'
      : `${report.problems.length} problem${report.problems.length === 1 ? '' : 's'} found; fix ${report.problems.length === 1 ? 'it' : 'them'} before \`aerie run\``,
  );
  return lines.join('\n');
}

export async function doctorCommand(
  configPath: string,
  write: (s: string) => void = (s) => process.stdout.write(s),
): Promise<number> {
  const config = await loadConfigFile(configPath);
  const hosts = new HostPool();
  // A throwaway run id: the writability probe uses its folder, removed afterwards.
  const runId = `aerie-doctor-${process.pid}-${Date.now()}`;
  try {
    const host = hosts.get(config);
    const report = await runPreflight(host, config, runId, (c, name) => hosts.get(c, name));
    for (const name of new Set([config.target.host, ...(poolPlaces(config) ?? []).map((p) => p.host)])) {
      const h = hosts.get(config, name);
      await h.remove(runDir(h.workdir, runId)).catch(() => undefined);
    }
    write(renderDoctorReport(report) + '\n');
    return report.problems.length === 0 ? 0 : 1;
  } finally {
    await hosts.closeAll();
  }
}
