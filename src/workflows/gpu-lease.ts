/**
 * One host's GPU leases, kept by Temporal: the lease workflow `aerie-lease-<host>`, started
 * by the first request (signal-with-start from an activity) and ended when nobody holds or
 * waits. Requests, renewals and releases arrive as signals; the table (lease-table.ts) decides.
 * A holder whose renewals stop (its worker is gone) loses its GPUs once its TTL has passed,
 * measured on workflow time, so the expiry happens even while the holder's workflow has no
 * worker at all. The history grows by one signal per renewal: the workflow continues as new
 * with its table well before that matters.
 */
import { condition, continueAsNew, defineQuery, defineSignal, setHandler, workflowInfo } from '@temporalio/workflow';
import type { LeaseHolder, LeaseNames, LeaseRequest, LeaseSnapshot } from '../leases/protocol.js';
import { LeaseTable, type LeaseTableState } from './lease-table.js';

export const leaseRequestSignal = defineSignal<[LeaseRequest]>('aerieLeaseRequest' satisfies LeaseNames['request']);
export const leaseRenewSignal = defineSignal<[Pick<LeaseHolder, 'workflowId' | 'execution'>]>(
  'aerieLeaseRenew' satisfies LeaseNames['renew'],
);
export const leaseReleaseSignal = defineSignal<[Pick<LeaseHolder, 'workflowId' | 'execution'>]>(
  'aerieLeaseRelease' satisfies LeaseNames['release'],
);
export const leasesQuery = defineQuery<LeaseSnapshot>('aerieLeases' satisfies LeaseNames['query']);

export interface GpuLeaseInput {
  host: string;
  /** The table carried over by continue-as-new. */
  state?: LeaseTableState;
  /** History length at which it continues as new (tests set a small one). */
  continueAfterEvents?: number;
}

/** Well under Temporal's 50k-event limit and the point where replaying a long history gets slow. */
const HISTORY_EVENTS_BEFORE_CONTINUE = 2000;

export async function gpuLease({ host, state, continueAfterEvents }: GpuLeaseInput): Promise<void> {
  const table = new LeaseTable(state);
  const now = () => Date.now();
  let changed = true;
  setHandler(leaseRequestSignal, (req) => {
    table.request(req, now());
    changed = true;
  });
  setHandler(leaseRenewSignal, (h) => {
    table.renew(`${h.workflowId}/${h.execution}`, now());
  });
  setHandler(leaseReleaseSignal, (h) => {
    if (table.release(`${h.workflowId}/${h.execution}`)) changed = true;
  });
  setHandler(leasesQuery, () => table.snapshot(host, now()));

  const historyFull = () => {
    const info = workflowInfo();
    return info.continueAsNewSuggested || info.historyLength > (continueAfterEvents ?? HISTORY_EVENTS_BEFORE_CONTINUE);
  };
  for (;;) {
    table.expire(now());
    table.grant(now());
    if (table.empty) return;
    if (historyFull()) {
      // Signal handlers are synchronous, so nothing is half-handled: the table is the whole state.
      await continueAsNew<typeof gpuLease>({ host, state: table.state, continueAfterEvents });
    }
    changed = false;
    // Wake on a request or release, when the history is long (renewals alone grow it), or when
    // the earliest lease could expire (a renewal moves that later: the loop then finds nothing
    // expired and waits again).
    const wait = Math.max(1, (table.nextExpiry() ?? now()) - now());
    await condition(() => changed || historyFull(), wait);
  }
}
