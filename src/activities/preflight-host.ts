/**
 * Preflight's questions to one host that the pool's servers ask too: can it be reached (with a
 * verified key), is a port free or held by this run's own server, and are its GPUs free of
 * processes aerie did not start.
 */
import type { GpuInventory, GpuProcess, Host } from '../hosts/host.js';
import { SshConnectError, SshTrustError, SshHost } from '../hosts/index.js';
import type { Findings } from './preflight-probes.js';
import { portHolderOf } from './server-watch.js';

/** Can the host be reached at all? An SSH host says through which key. */
export async function checkReachable(host: Host, out: Findings): Promise<boolean> {
  const where = host instanceof SshHost ? await host.describe().catch(() => host.name) : host.name;
  try {
    const r = await host.exec(['true'], { timeoutMs: 60_000 });
    if (r.code !== 0) throw new Error(`\`true\` exited ${r.code}: ${r.stderr.trim()}`);
  } catch (err) {
    const e = err as Error;
    if (err instanceof SshTrustError) out.problems.push(`hosts.${host.name}.ssh: ${e.message}`);
    else if (err instanceof SshConnectError) {
      out.problems.push(
        `hosts.${host.name}: ${e.message}. Fix: check ssh.host (${where}), that sshd runs there, and the network path (ProxyJump)`,
      );
    } else out.problems.push(`hosts.${host.name}: cannot run commands on ${where}: ${e.message}`);
    return false;
  }
  if (host instanceof SshHost) {
    const keys = host.link.lastKeys.map(
      (k) => `${k.host} ${k.keyType} ${k.fingerprint}${k.added ? ' (recorded on first use)' : ''}`,
    );
    out.checks.push(
      `host ${host.name} reachable over SSH: ${where}; host key${keys.length > 1 ? 's' : ''} verified: ${keys.join(', ')}`,
    );
  } else out.checks.push(`host ${host.name} reachable`);
  return true;
}

/** The port is free, or held by this run's own server (a resumed run's, still up); `field` is what to change. */
export async function checkPort(host: Host, port: number, field: string, runId: string, out: Findings): Promise<void> {
  const holder = await portHolderOf(host, port);
  if (!holder.listening) return void out.checks.push(`port ${port} free`);
  // A resumed run's own server (still up from before) holds the port through a child of the
  // recorded wrapper: match by process group, not by pid.
  const ours = (await host.listLaunches()).find(
    (r) => holder.pgid !== undefined && r.pgid === holder.pgid && r.launchId.startsWith(`${runId}.`),
  );
  if (ours) return;
  const who = holder.pid
    ? `pid ${holder.pid}${holder.command ? ` (${holder.command})` : ''}`
    : 'a process aerie cannot see';
  out.problems.push(
    `${field}: ${port} on ${host.name} is held by ${who}; aerie will not stop it. Fix: stop that process yourself or set ${field} to a free port`,
  );
}

/**
 * Foreign GPU processes block the run only on the GPUs it will use (all, unless the host
 * lists its gpus). aerie never stops them (incident 4): it names them and their owner's GPU.
 */
export function judgeGpus(
  inv: GpuInventory,
  wanted: number[] | undefined,
  field: string,
  hostName: string,
): { checks: string[]; problems: string[] } {
  const checks: string[] = [];
  const problems: string[] = [];
  const present = new Set(inv.gpus.map((g) => g.index));
  const missing = (wanted ?? []).filter((i) => !present.has(i));
  if (missing.length > 0) {
    problems.push(
      `${field}: GPU ${missing.join(', ')} not on ${hostName}, which has ${inv.gpus.length ? inv.gpus.map((g) => g.index).join(', ') : 'none'}. Fix: list GPUs nvidia-smi shows there`,
    );
  }
  const used = wanted ? new Set(wanted) : present;
  const onOurs = (p: GpuProcess) => p.gpuIndex === null || used.has(p.gpuIndex);
  const where = (p: GpuProcess) =>
    `pid ${p.pid} (${p.usedMemoryMiB} MiB${p.gpuIndex === null ? '' : ` on GPU ${p.gpuIndex}`})`;
  const foreign = inv.processes.filter((p) => !p.ours);
  const blocking = foreign.filter(onOurs);
  const elsewhere = foreign.filter((p) => !onOurs(p));
  if (blocking.length > 0) {
    problems.push(
      `GPUs ${wanted ? `${[...used].join(', ')} ` : ''}on ${hostName} are in use by processes aerie did not start: ${blocking.map(where).join(', ')}. ` +
        `aerie never stops them (incident 4). Fix: ask their owner to stop them, wait until the GPUs are free` +
        (wanted ? `, or choose other GPUs in ${field}` : `, or list the free GPUs in ${field}`),
    );
  } else checks.push(wanted ? `GPUs ${wanted.join(', ')} free` : `${inv.gpus.length} GPUs free`);
  if (elsewhere.length > 0) checks.push(`other GPUs in use, left alone: ${elsewhere.map(where).join(', ')}`);
  return { checks, problems };
}
