/**
 * stages.generate.servers and stages.extract.servers checked against hosts and each other, on
 * the raw document like the other cross-field checks: every server names a host, uses GPUs
 * that host lets the run use, and no two servers of a stage on one host share a port or a GPU.
 * An extraction server off the target host writes onto the target's disk: its host must say
 * it shares the target's files, at the same workdir.
 */
type Problem = { path: string[]; message: string };

export function poolProblems(doc: Record<string, any>, hosts: Record<string, any>): Problem[] {
  return [...stagePoolProblems(doc, hosts, 'generate'), ...stagePoolProblems(doc, hosts, 'extract')];
}

function stagePoolProblems(doc: Record<string, any>, hosts: Record<string, any>, stage: string): Problem[] {
  const out: Problem[] = [];
  const section = doc.stages?.[stage] ?? {};
  const servers: unknown = section.servers;
  const base = ['stages', stage];
  if (!Array.isArray(servers)) {
    if (section['batch-size'] !== undefined && stage === 'generate')
      out.push({
        path: [...base, 'batch-size'],
        message: `applies only to a pool of servers: set stages.${stage}.servers too, or remove batch-size`,
      });
    return out;
  }
  const target = doc.target?.host;
  const seen: { i: number; host: string; port: unknown; gpus: number[] | 'all' }[] = [];
  servers.forEach((raw: any, i: number) => {
    const at = [...base, 'servers', String(i)];
    const hostName = raw?.host ?? doc.target?.host;
    if (typeof hostName !== 'string') return;
    const host = hosts[hostName];
    if (!host) {
      out.push({
        path: [...at, 'host'],
        message: `names no host: "${hostName}" is not one of hosts (${Object.keys(hosts).join(', ') || 'none defined'})`,
      });
      return;
    }
    if (stage === 'extract' && hostName !== target && typeof target === 'string') {
      if (host['shares-files-with'] !== target)
        out.push({
          path: [...at, 'host'],
          message: `${hostName} would write the hidden states onto ${target}'s disk, which it must see: set hosts.${hostName}.shares-files-with: ${target} (a shared filesystem, checked by preflight), or run this server on ${target}`,
        });
      else if (host.workdir !== hosts[target]?.workdir)
        out.push({
          path: ['hosts', hostName, 'workdir'],
          message: `must be ${target}'s workdir (${String(hosts[target]?.workdir)}): the shared run folders are read at the same path on both hosts`,
        });
    }
    const allowed: unknown = host.gpus;
    const gpus: unknown = raw?.gpus ?? allowed;
    if (Array.isArray(raw?.gpus) && Array.isArray(allowed)) {
      const outside = raw.gpus.filter((g: unknown) => !allowed.includes(g));
      if (outside.length > 0)
        out.push({
          path: [...at, 'gpus'],
          message: `GPU ${outside.join(', ')} is not among hosts.${hostName}.gpus (${allowed.join(', ')}); use only those, or widen hosts.${hostName}.gpus`,
        });
    }
    const port = raw?.port ?? doc.server?.port;
    const mine = { i, host: hostName, port, gpus: Array.isArray(gpus) ? (gpus as number[]) : ('all' as const) };
    for (const other of seen.filter((o) => o.host === hostName)) {
      if (other.port === port)
        out.push({
          path: [...at, 'port'],
          message: `${hostName}:${String(port)} is also servers.${other.i}'s port; give each server on one host its own port`,
        });
      const shared =
        mine.gpus === 'all' || other.gpus === 'all'
          ? 'all'
          : mine.gpus.filter((g) => (other.gpus as number[]).includes(g));
      if (shared === 'all' || shared.length > 0)
        out.push({
          path: [...at, 'gpus'],
          message: `shares ${shared === 'all' ? 'its GPUs' : `GPU ${shared.join(', ')}`} with servers.${other.i} on ${hostName}; give each server on one host its own GPUs (servers.N.gpus)`,
        });
    }
    seen.push(mine);
  });
  return out;
}
