/**
 * `aerie hosts [config.yaml]`: every host whose GPUs are leased, with who holds which GPUs
 * since when and who waits, read from the hosts' lease workflows (workflows/gpu-lease.ts).
 * With a config, its hosts are listed too, free ones included.
 */
import type { Client, WorkflowHandle } from '@temporalio/client';
import { loadConfigFile } from '../config/load.js';
import {
  describeGpus,
  LEASE_NAMES,
  leaseWorkflowId,
  type LeaseEntryView,
  type LeaseSnapshot,
} from '../leases/protocol.js';
import { resolveTemporal } from '../temporal/connect.js';
import { reachTemporal } from './reach.js';

/** What one host shows: its lease table, or why it could not be read. */
export type HostLeases = { host: string; snapshot?: LeaseSnapshot; problem?: string };

export async function hostsCommand(configPath?: string, out: NodeJS.WritableStream = process.stdout): Promise<number> {
  const named = configPath ? Object.keys((await loadConfigFile(configPath)).hosts) : [];
  const client = await reachTemporal(await resolveTemporal());
  try {
    const rows = await readHosts(client, named);
    out.write(renderHosts(rows, Date.now()));
    return 0;
  } finally {
    await client.connection.close();
  }
}

/** The hosts with a running lease workflow, plus the named ones; each host's table as its workflow answers. */
export async function readHosts(client: Client, named: string[] = [], timeoutMs = 5000): Promise<HostLeases[]> {
  const running = new Map<string, WorkflowHandle>();
  const prefix = leaseWorkflowId('');
  for await (const wf of client.workflow.list({
    query: `WorkflowType = '${LEASE_NAMES.workflow}' AND ExecutionStatus = 'Running'`,
  })) {
    if (wf.workflowId.startsWith(prefix))
      running.set(wf.workflowId.slice(prefix.length), client.workflow.getHandle(wf.workflowId));
  }
  const hosts = [...new Set([...named, ...running.keys()])].sort();
  return Promise.all(
    hosts.map(async (host): Promise<HostLeases> => {
      const handle = running.get(host);
      if (!handle) return { host };
      const timeout = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs).unref());
      const answer = await Promise.race([
        handle.query<LeaseSnapshot>(LEASE_NAMES.query).catch((err: Error) => err),
        timeout,
      ]);
      if (answer === 'timeout')
        return { host, problem: 'its lease workflow does not answer: is an `aerie worker` running?' };
      if (answer instanceof Error) return { host, problem: `its lease workflow could not be read: ${answer.message}` };
      return { host, snapshot: answer };
    }),
  );
}

/** The listing, one block per host. */
export function renderHosts(rows: HostLeases[], now: number): string {
  if (rows.length === 0) return 'no host has leased GPUs (give a config to list its hosts)\n';
  const lines: string[] = [];
  for (const { host, snapshot, problem } of rows) {
    if (problem) {
      lines.push(`${host}: ${problem}`);
      continue;
    }
    if (!snapshot || (snapshot.holders.length === 0 && snapshot.waiters.length === 0)) {
      lines.push(`${host}: free (no run holds or waits for its GPUs)`);
      continue;
    }
    lines.push(`${host}:`);
    for (const h of snapshot.holders)
      lines.push(
        `  GPUs ${describeGpus(h.gpus).padEnd(7)} held by ${who(h)} since ${h.grantedAt ?? h.requestedAt} (renewed ${ago(h.renewedAt, now)}, expires ${Math.round(h.ttlMs / 1000)} s after its last renewal)`,
      );
    snapshot.waiters.forEach((w, i) =>
      lines.push(
        `  waiting ${String(i + 1).padStart(2)}. ${who(w)} for GPUs ${describeGpus(w.gpus)} since ${w.requestedAt}`,
      ),
    );
    const expired = snapshot.expired.filter((e) => e.held).slice(-3);
    for (const e of expired)
      lines.push(`  expired: ${who(e)} on GPUs ${describeGpus(e.gpus)} at ${e.expiredAt} (its renewals had stopped)`);
  }
  return lines.join('\n') + '\n';
}

function who(e: LeaseEntryView): string {
  return `run ${e.holder.runId}${e.holder.label ? ` (${e.holder.label})` : ''}`;
}

function ago(iso: string, now: number): string {
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  return `${s} s ago`;
}
