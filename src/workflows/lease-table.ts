/**
 * The lease workflow's state, pure so it is tested without a server: per host, who holds which
 * GPUs and who waits, in request order. Waiters are served first come, first served: a waiter
 * is granted only when its GPUs are free and no earlier waiter wants any of them, so a run
 * asking for all eight GPUs is not starved by a stream of runs asking for one. Times are
 * milliseconds of workflow time; the state is plain data, carried across continue-as-new.
 */
import type { AllGpus, ExpiredLeaseView, LeaseEntryView, LeaseRequest, LeaseSnapshot } from '../leases/protocol.js';

const ALL: AllGpus = '*';
/** Expiries kept for the query (and for the next holder to clear what the expired one left). */
const EXPIRED_KEPT = 20;

interface Entry {
  key: string;
  request: LeaseRequest;
  requestedAt: number;
  renewedAt: number;
  grantedAt?: number;
}

interface Expired extends Entry {
  expiredAt: number;
  held: boolean;
}

export interface LeaseTableState {
  /** Holders and waiters, in request order. */
  entries: Entry[];
  expired: Expired[];
}

export function gpusConflict(a: readonly string[], b: readonly string[]): boolean {
  if (a.length === 0 || b.length === 0) return false;
  if (a.includes(ALL) || b.includes(ALL)) return true;
  return a.some((g) => b.includes(g));
}

const keyOf = (r: LeaseRequest) => `${r.holder.workflowId}/${r.holder.execution}`;

export class LeaseTable {
  readonly state: LeaseTableState;

  constructor(state?: LeaseTableState) {
    this.state = state ?? { entries: [], expired: [] };
  }

  /**
   * A new request joins the queue; a repeated one (an activity retried, a waiter renewing)
   * keeps its place and counts as a renewal. A waiter may change the GPUs it asks for; a holder may not.
   */
  request(req: LeaseRequest, now: number): void {
    const key = keyOf(req);
    const e = this.state.entries.find((x) => x.key === key);
    if (!e) {
      this.state.entries.push({ key, request: req, requestedAt: now, renewedAt: now });
      return;
    }
    e.renewedAt = now;
    if (e.grantedAt === undefined) e.request = req;
  }

  /** False when the key holds and waits for nothing here (it expired, or released). */
  renew(key: string, now: number): boolean {
    const e = this.state.entries.find((x) => x.key === key);
    if (e) e.renewedAt = now;
    return e !== undefined;
  }

  release(key: string): boolean {
    const before = this.state.entries.length;
    this.state.entries = this.state.entries.filter((x) => x.key !== key);
    return this.state.entries.length !== before;
  }

  /** Drops every entry not renewed within its TTL; returns the keys that held GPUs. */
  expire(now: number): string[] {
    const gone = this.state.entries.filter((e) => now >= e.renewedAt + e.request.ttlMs);
    if (gone.length === 0) return [];
    this.state.entries = this.state.entries.filter((e) => !gone.includes(e));
    for (const e of gone) this.state.expired.push({ ...e, expiredAt: now, held: e.grantedAt !== undefined });
    this.state.expired = this.state.expired.slice(-EXPIRED_KEPT);
    return gone.filter((e) => e.grantedAt !== undefined).map((e) => e.key);
  }

  /** Grants what can be granted, in request order; returns the keys newly granted. */
  grant(now: number): string[] {
    const held = this.state.entries.filter((e) => e.grantedAt !== undefined).flatMap((e) => e.request.gpus);
    const wanted: string[] = [];
    const granted: string[] = [];
    for (const e of this.state.entries) {
      if (e.grantedAt !== undefined) continue;
      if (gpusConflict(e.request.gpus, held) || gpusConflict(e.request.gpus, wanted)) {
        wanted.push(...e.request.gpus);
        continue;
      }
      e.grantedAt = now;
      held.push(...e.request.gpus);
      granted.push(e.key);
    }
    return granted;
  }

  /** When the next entry expires unless renewed; undefined when nobody holds or waits. */
  nextExpiry(): number | undefined {
    const at = this.state.entries.map((e) => e.renewedAt + e.request.ttlMs);
    return at.length ? Math.min(...at) : undefined;
  }

  get empty(): boolean {
    return this.state.entries.length === 0;
  }

  snapshot(host: string, now: number): LeaseSnapshot {
    return {
      host,
      now: iso(now),
      holders: this.state.entries.filter((e) => e.grantedAt !== undefined).map(view),
      waiters: this.state.entries.filter((e) => e.grantedAt === undefined).map(view),
      expired: this.state.expired.map((e): ExpiredLeaseView => ({
        ...view(e),
        expiredAt: iso(e.expiredAt),
        held: e.held,
      })),
    };
  }
}

function view(e: Entry): LeaseEntryView {
  return {
    holder: e.request.holder,
    gpus: e.request.gpus,
    ttlMs: e.request.ttlMs,
    requestedAt: iso(e.requestedAt),
    renewedAt: iso(e.renewedAt),
    ...(e.grantedAt !== undefined ? { grantedAt: iso(e.grantedAt) } : {}),
  };
}

const iso = (ms: number) => new Date(ms).toISOString();
