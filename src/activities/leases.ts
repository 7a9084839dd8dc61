/**
 * GPU leases from the run's side: ask the host's lease workflow for the GPUs the run will use
 * (signal-with-start, so the first run on a host starts it), wait in its queue, keep the lease
 * renewed while the run lives, give it back at the end. The workflow (workflows/gpu-lease.ts)
 * decides; these activities only talk to it through the worker's client, by name.
 *
 * Liveness: renewals come from an activity on the run's worker. When that worker is gone for
 * good, the renewals stop and the lease expires after its TTL; a worker that merely restarts
 * (or another worker picking the activity up after its heartbeat timeout) renews in time.
 */
import { CancelledFailure, Context, sleep } from '@temporalio/activity';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { runGpus } from '../config/gpus.js';
import type { Config } from '../config/schema.js';
import {
  ALL_GPUS,
  DEFAULT_LEASE_TTL_MS,
  describeGpus,
  holderKey,
  LEASE_NAMES,
  leaseWorkflowId,
  renewEveryMs,
  WAIT_POLL_MS,
  type LeaseEntryView,
  type LeaseHolder,
  type LeaseRequest,
  type LeaseSnapshot,
} from '../leases/protocol.js';
import { stopRunLaunches } from '../hosts/index.js';
import { TASK_QUEUE } from '../shared.js';
import type { ActivityDeps, RunRef } from './context.js';

export interface LeaseDeps extends ActivityDeps {
  /** Where lease workflows run: a queue every worker polls (default the pipeline's), so one host's leases outlive any one run's worker. */
  leaseTaskQueue?: string;
}

/** The GPUs a run holds on its target host, as acquireGpuLease granted them. */
export interface LeaseGrant {
  host: string;
  gpus: string[];
  ttlMs: number;
  waitedMs: number;
  /** One line for the board. */
  note: string;
}

export type LeaseRef = RunRef & Pick<LeaseGrant, 'host' | 'gpus' | 'ttlMs'>;

export function leaseActivities(deps: LeaseDeps) {
  const taskQueue = deps.leaseTaskQueue ?? TASK_QUEUE;
  return {
    /** Waits, heartbeating who is in the way, until the host's lease workflow grants the run's GPUs. */
    async acquireGpuLease(input: RunRef): Promise<LeaseGrant> {
      const { config } = input;
      const host = config.target.host;
      const req: LeaseRequest = { holder: holderOf(input), gpus: await gpusOf(deps, config), ttlMs: leaseTtl(config) };
      const key = holderKey(req.holder);
      const client = Context.current().client;
      const started = Date.now();
      const every = renewEveryMs(req.ttlMs);
      let requestedAt = 0;
      try {
        for (;;) {
          // Re-sent once per renewal interval: it renews a waiter's place, and restarts a lease
          // workflow that ended or was terminated.
          if (Date.now() - requestedAt >= every) {
            await requestLease(client, taskQueue, host, req);
            requestedAt = Date.now();
          }
          const snap = await snapshotOf(client, host);
          const mine = typeof snap === 'string' ? undefined : snap.holders.find((h) => holderKey(h.holder) === key);
          if (mine) {
            const waitedMs = Date.now() - started;
            const cleared = await clearExpired(deps, input, snap as LeaseSnapshot, mine);
            const waited = waitedMs >= 1000 ? ` after waiting ${Math.round(waitedMs / 1000)} s` : '';
            return {
              host,
              gpus: req.gpus,
              ttlMs: req.ttlMs,
              waitedMs,
              note: `holding ${host} GPUs ${describeGpus(req.gpus)}${waited}${cleared}`,
            };
          }
          Context.current().heartbeat({ phase: waitingPhase(host, req.gpus, snap) });
          await sleep(Math.min(WAIT_POLL_MS, every));
        }
      } catch (err) {
        // A cancelled run (or one already closed: its cancel did not wait for this activity)
        // leaves the queue at once rather than after its TTL; a worker shutting down does not,
        // so the retried attempt keeps the place.
        const why = Context.current().cancellationDetails;
        if (why?.cancelRequested || why?.notFound) await releaseLease(client, host, req.holder);
        throw err;
      }
    },

    /**
     * Renews the run's lease until the workflow cancels this activity (the run ended). A lease
     * found lost (this run's worker was away longer than the TTL) is asked for again and the
     * heartbeat says so; the run itself goes on.
     */
    async holdGpuLease(input: LeaseRef): Promise<void> {
      const holder = holderOf(input);
      const key = holderKey(holder);
      const client = Context.current().client;
      const req: LeaseRequest = { holder, gpus: input.gpus, ttlMs: input.ttlMs };
      const every = renewEveryMs(input.ttlMs);
      const held = `holding ${input.host} GPUs ${describeGpus(input.gpus)}`;
      let phase = held;
      let renewedAt = 0;
      for (;;) {
        // Heartbeats every tick (the worker's liveness, and how a cancel arrives); renewals when due.
        Context.current().heartbeat({ phase });
        if (Date.now() - renewedAt >= every) {
          let lost = false;
          try {
            await client.workflow.getHandle(leaseWorkflowId(input.host)).signal(LEASE_NAMES.renew, holder);
            const snap = await snapshotOf(client, input.host);
            lost = typeof snap !== 'string' && !snap.holders.some((h) => holderKey(h.holder) === key);
          } catch (err) {
            if (!(err instanceof WorkflowNotFoundError)) throw err;
            lost = true;
          }
          // A cancelled hold (the run is releasing) must not ask again.
          if (Context.current().cancellationSignal.aborted) throw new CancelledFailure('the run released its lease');
          if (lost) await requestLease(client, taskQueue, input.host, req);
          renewedAt = Date.now();
          phase = lost ? `${held}: lost (this run's renewals stopped for longer than its TTL); asked again` : held;
        }
        await sleep(Math.min(WAIT_POLL_MS, every));
      }
    },

    /** Gives the GPUs back (or leaves the queue); a lease workflow already gone has nothing to give back. */
    async releaseGpuLease(input: Pick<LeaseRef, 'host'>): Promise<void> {
      const { workflowId, execution } = executionOf();
      await releaseLease(Context.current().client, input.host, { workflowId, execution });
    },
  };
}

export type LeaseActivities = ReturnType<typeof leaseActivities>;

function holderOf({ runId, config }: RunRef): LeaseHolder {
  return { ...executionOf(), runId, label: config.run.label };
}

/** The workflow execution this activity serves: the lease's holder. */
function executionOf(): Pick<LeaseHolder, 'workflowId' | 'execution'> {
  const exec = Context.current().info.workflowExecution;
  if (!exec) throw new Error('GPU lease activities run only inside a workflow: they lease for its execution');
  return { workflowId: exec.workflowId, execution: exec.runId };
}

/**
 * hosts.<name>.gpus when the config names them; else every GPU the inventory lists; else the
 * whole host. A host that cannot be asked (unreachable, no nvidia-smi) is leased whole: the
 * lease comes before preflight, whose checks say what is wrong with it in their own words.
 */
async function gpusOf(deps: ActivityDeps, config: Config): Promise<string[]> {
  const named = runGpus(config);
  if (named?.length) return named.map(String);
  const inv = await deps.hosts
    .get(config)
    .gpuInventory()
    .catch(() => undefined);
  return inv?.available && inv.gpus.length ? inv.gpus.map((g) => String(g.index)) : [ALL_GPUS];
}

/**
 * run.lease-ttl; unset (and in histories from before the field), the default, raised to four
 * heartbeat timeouts so a worker replaced mid-run still renews in time (the config refuses a
 * TTL set at or below the heartbeat timeout).
 */
export function leaseTtl(config: Pick<Config, 'run'>): number {
  return config.run['lease-ttl'] ?? Math.max(DEFAULT_LEASE_TTL_MS, 4 * config.run['heartbeat-timeout']);
}

async function requestLease(client: Client, taskQueue: string, host: string, req: LeaseRequest): Promise<void> {
  await client.workflow.signalWithStart(LEASE_NAMES.workflow, {
    workflowId: leaseWorkflowId(host),
    taskQueue,
    args: [{ host }],
    signal: LEASE_NAMES.request,
    signalArgs: [req],
  });
}

async function releaseLease(client: Client, host: string, holder: Pick<LeaseHolder, 'workflowId' | 'execution'>) {
  try {
    await client.workflow.getHandle(leaseWorkflowId(host)).signal(LEASE_NAMES.release, holder);
  } catch (err) {
    if (!(err instanceof WorkflowNotFoundError)) throw err;
  }
}

/**
 * The lease workflow's table, or why it cannot answer now (it just ended, or no worker polls
 * its queue): the caller asks again next round and says why in its heartbeat.
 */
async function snapshotOf(client: Client, host: string): Promise<LeaseSnapshot | string> {
  try {
    return await client.workflow.getHandle(leaseWorkflowId(host)).query<LeaseSnapshot>(LEASE_NAMES.query);
  } catch (err) {
    return (err as Error).message;
  }
}

/** "waiting for gpu-a GPUs 0–7, held by run X since …": the first holder in the way, or the queue ahead. */
export function waitingPhase(host: string, gpus: string[], snap: LeaseSnapshot | string): string {
  const what = `waiting for ${host} GPUs ${describeGpus(gpus)}`;
  if (typeof snap === 'string') return `${what} (the host's lease workflow does not answer yet: ${snap.slice(0, 160)})`;
  const blocking = snap.holders.find((h) => overlaps(h.gpus, gpus));
  if (blocking) return `${what}, held by ${who(blocking)} since ${blocking.grantedAt ?? blocking.requestedAt}`;
  const ahead = snap.waiters.findIndex((w) => overlaps(w.gpus, gpus));
  return ahead >= 0 ? `${what}, behind ${who(snap.waiters[ahead]!)} in the queue` : what;
}

function overlaps(a: string[], b: string[]): boolean {
  return a.includes(ALL_GPUS) || b.includes(ALL_GPUS) || a.some((g) => b.includes(g));
}

function who(e: LeaseEntryView): string {
  return `run ${e.holder.runId}${e.holder.label ? ` (${e.holder.label})` : ''}`;
}

/**
 * A lease that expired while its run held these GPUs may have left that run's processes on
 * them (its worker died; its servers did not). They are stopped by their launch records, as
 * any aerie launch is (never by name), so the GPUs the lease now grants are free in fact. Only
 * expiries since this run asked, of another run, on the GPUs granted now, are cleared.
 */
async function clearExpired(deps: ActivityDeps, input: RunRef, snap: LeaseSnapshot, mine: LeaseEntryView) {
  const gone = snap.expired.filter(
    (e) => e.held && e.holder.runId !== input.runId && e.expiredAt >= mine.requestedAt && overlaps(e.gpus, mine.gpus),
  );
  if (gone.length === 0) return '';
  const runs = gone.map((e) => e.holder.runId).join(', ');
  const host = deps.hosts.get(input.config);
  let stopped: string[] = [];
  try {
    stopped = await stopRunLaunches(
      host,
      gone.map((e) => e.holder.runId),
    );
  } catch (err) {
    // Preflight still checks the GPUs for processes that are not this run's.
    return `; the lease of ${runs} had expired (what it left running could not be checked: ${(err as Error).message})`;
  }
  return `; the lease of ${runs} had expired${stopped.length ? `: stopped what it left running (${stopped.join(', ')})` : ''}`;
}
