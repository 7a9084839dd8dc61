/**
 * GPU leases across runs: the names and shapes the lease workflow, its activities and
 * `aerie hosts` agree on. One lease workflow per host, keyed by the host's name, holds per GPU
 * the run that has it and a FIFO of runs waiting. A holder renews; one that stops renewing
 * (its worker is gone) loses its GPUs after its TTL. Pure: no Temporal, no Node built-ins.
 */

/** The workflow type and the signal and query names, as registered (the workflow spells them as literals checked against these). */
export const LEASE_NAMES = {
  workflow: 'gpuLease',
  request: 'aerieLeaseRequest',
  renew: 'aerieLeaseRenew',
  release: 'aerieLeaseRelease',
  query: 'aerieLeases',
} as const;
export type LeaseNames = typeof LEASE_NAMES;

/** The lease workflow of a host: one per host name, so every run on that host meets the same one. */
export function leaseWorkflowId(host: string): string {
  return `aerie-lease-${host}`;
}

/** A GPU key standing for every GPU of a host whose inventory is unknown: it conflicts with any other key. */
export const ALL_GPUS = '*';
export type AllGpus = typeof ALL_GPUS;

/** Who holds or waits: one execution of a run's workflow (a resumed run is a new execution, so a new holder). */
export interface LeaseHolder {
  /** The workflow id (aerie's run id for `aerie run`). */
  workflowId: string;
  /** Temporal's execution run id. */
  execution: string;
  /** aerie's run id and label, for people. */
  runId: string;
  label?: string;
}

export function holderKey(h: Pick<LeaseHolder, 'workflowId' | 'execution'>): string {
  return `${h.workflowId}/${h.execution}`;
}

export interface LeaseRequest {
  holder: LeaseHolder;
  /** GPU indices as strings ("0", "1", …), or [ALL_GPUS]. */
  gpus: string[];
  /** How long the lease lasts without a renewal. */
  ttlMs: number;
}

/** One holder or waiter as the query shows it; times are ISO strings of workflow time. */
export interface LeaseEntryView {
  holder: LeaseHolder;
  gpus: string[];
  ttlMs: number;
  requestedAt: string;
  renewedAt: string;
  /** Set once the GPUs are this entry's. */
  grantedAt?: string;
}

export interface ExpiredLeaseView extends LeaseEntryView {
  expiredAt: string;
  /** It held its GPUs when it expired (not merely waited): its processes may still be on them. */
  held: boolean;
}

/** What the lease workflow's query answers. */
export interface LeaseSnapshot {
  host: string;
  now: string;
  holders: LeaseEntryView[];
  /** In the order they will be served. */
  waiters: LeaseEntryView[];
  /** The most recent expiries, newest last. */
  expired: ExpiredLeaseView[];
}

/** "0–7", "0,2,5", "all": a GPU set for people. */
export function describeGpus(gpus: readonly string[]): string {
  if (gpus.includes(ALL_GPUS)) return 'all';
  const n = gpus.map(Number);
  const contiguous = n.length > 2 && n.every((v, i) => i === 0 || v === n[i - 1]! + 1);
  return contiguous ? `${n[0]}–${n.at(-1)}` : gpus.join(',');
}

/**
 * A lease's life without a renewal, when the config does not say: long enough to outlast a
 * worker being replaced (the holding activity's heartbeat timeout and a retry), short enough
 * that a crashed run's GPUs come back within minutes.
 */
export const DEFAULT_LEASE_TTL_MS = 120_000;

/**
 * How often a holder or a waiter renews: four times per TTL, so three renewals may be lost or
 * late before the lease is. Each renewal is a signal in the lease workflow's history.
 */
export function renewEveryMs(ttlMs: number): number {
  return Math.max(250, Math.floor(ttlMs / 4));
}

/** How often a waiter looks whether its turn has come: a query, which adds nothing to any history. */
export const WAIT_POLL_MS = 1000;
