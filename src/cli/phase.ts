/**
 * One line about what the running activity is doing, from its latest heartbeat details.
 * Pure: the CLI's live table and `aerie status` share it.
 */
import { renderSweepProgress } from '../bench/progress.js';

export interface PendingActivity {
  activityType: string;
  attempt: number;
  details?: unknown;
  lastFailure?: string;
  /** Scheduled and not yet taken by any worker (Temporal's SCHEDULED state), since when, on which queue. */
  scheduled?: boolean;
  scheduledAtMs?: number;
  queue?: string;
}

const secs = (ms: unknown) => (typeof ms === 'number' ? `${Math.round(ms / 1000)} s` : '');

export function describeActivity(a: PendingActivity): string {
  const d = (a.details ?? {}) as Record<string, unknown>;
  const num = (k: string) => (typeof d[k] === 'number' ? (d[k] as number) : undefined);
  let text: string;
  switch (a.activityType) {
    case 'awaitServerReady':
      text = `server ${String(d.phase ?? 'starting')} ${secs(d.elapsedMs)}${d.lastHttp !== undefined ? `, HTTP ${d.lastHttp ?? 'no answer'}` : ''}`;
      break;
    case 'checkExtractSpace':
      text = 'estimating hidden-state bytes against free space';
      break;
    case 'generateData':
    case 'extractOffline':
    case 'extractTransformers':
    case 'extractHiddenStates': {
      const done = num('done');
      const total = num('total');
      const rate = num('rate');
      text =
        done !== undefined && total !== undefined
          ? `${a.activityType === 'generateData' ? 'regenerated' : 'extracted'} ${done}/${total}${rate ? ` (${rate.toFixed(1)}/s)` : ''}`
          : String(
              d.phase ??
                (a.activityType === 'generateData'
                  ? 'regenerating the conversations with the target'
                  : 'extracting hidden states'),
            );
      break;
    }
    case 'planGeneratePool':
      text = 'planning the batches: rejects, skips and unsafe ids set aside';
      break;
    case 'generatePoolBatch': {
      const done = num('done');
      const total = num('total');
      const rate = num('rate');
      const where = `batch ${String(d.batch ?? '?')} on ${String(d.server ?? 'a pool server')}`;
      text =
        done !== undefined && total !== undefined
          ? `${where}: ${done}/${total}${rate ? ` (${rate.toFixed(1)}/s)` : ''}`
          : where;
      break;
    }
    case 'combineGeneratePool':
      text = 'merging the batches into train.jsonl (input order)';
      break;
    case 'trainDrafter': {
      const parts: string[] = [];
      if (num('epoch') !== undefined)
        parts.push(`epoch ${num('epoch')}${num('totalEpochs') ? `/${num('totalEpochs')}` : ''}`);
      if (num('step') !== undefined)
        parts.push(`step ${num('step')}${num('totalSteps') ? `/${num('totalSteps')}` : ''}`);
      if (num('loss') !== undefined) parts.push(`loss ${num('loss')!.toFixed(3)}`);
      if (num('acc') !== undefined) parts.push(`acc ${num('acc')!.toFixed(3)}`);
      text = parts.length ? `training ${parts.join(' ')}` : 'trainer starting';
      break;
    }
    case 'benchmarkSweep':
      text = renderSweepProgress(a.details);
      break;
    // Activities that report no progress of their own: say what they do rather than their name.
    case 'preflight':
      text = 'checking the target host: SSH, interpreters, port, GPUs, paths, disk';
      break;
    case 'checkLedger':
      text = 'checking the ledger for finished work';
      break;
    case 'writeLedger':
      text = 'recording the stage in the ledger';
      break;
    case 'launchServer':
      text = 'launching the server';
      break;
    case 'smokeTest':
      text = `smoke test: ${String(d.smoke ?? 'greedy generation')} ${secs(d.elapsedMs)}`.trimEnd();
      break;
    case 'acceptanceGate':
      text = `acceptance gate: ${String(d.gate ?? 'greedy requests')}${num('done') !== undefined && num('of') !== undefined ? ` ${num('done')}/${num('of')}` : ''}`;
      break;
    case 'stopServer':
      text = 'stopping the server';
      break;
    case 'storedSweep':
      text = 'reading the stored benchmark results';
      break;
    case 'writeReport':
      text = 'writing report.md, report.html and results.jsonl';
      break;
    case 'acquireGpuLease':
      text = String(d.phase ?? 'waiting for the GPU lease');
      break;
    case 'holdGpuLease':
      text = String(d.phase ?? 'holding the GPU lease');
      break;
    case 'releaseGpuLease':
      text = 'giving the GPU lease back';
      break;
    default:
      text = a.activityType;
  }
  if (a.attempt > 1)
    text += ` [attempt ${a.attempt}${a.lastFailure ? `: ${a.lastFailure.split('\n')[0]!.slice(0, 80)}` : ''}]`;
  return text;
}

/**
 * The phase line for everything pending. The lease holder runs beside every stage for the
 * whole run: it is news only when it is all there is, or when it says the lease was lost.
 */
export function describePending(pending: readonly PendingActivity[]): string | undefined {
  const lost = (a: PendingActivity) =>
    /: lost/.test(String((a.details as { phase?: unknown } | undefined)?.phase ?? ''));
  const shown = pending.filter((a) => a.activityType !== 'holdGpuLease' || pending.length === 1 || lost(a));
  if (!shown.length) return undefined;
  const parts: string[] = [];
  for (const type of new Set(shown.map((a) => a.activityType))) {
    const of = shown.filter((a) => a.activityType === type);
    parts.push(of.length >= 3 && POOLED.has(type) ? describeBatches(of) : of.map(describeActivity).join('; '));
  }
  return parts.join('; ');
}

/** The activities a pool runs one of per server at once: on eight servers, eight lines would not fit one. */
const POOLED = new Set(['generatePoolBatch', 'extractHiddenStates']);

/** Several pool batches at once, summed: how many, their samples done, the pool's rate. */
function describeBatches(batches: readonly PendingActivity[]): string {
  let done = 0;
  let total = 0;
  let rate = 0;
  for (const b of batches) {
    const d = (b.details ?? {}) as Record<string, unknown>;
    if (typeof d.done === 'number' && typeof d.total === 'number') {
      done += d.done;
      total += d.total;
    }
    if (typeof d.rate === 'number') rate += d.rate;
  }
  const retried = batches.filter((b) => b.attempt > 1).length;
  return (
    `${batches.length} batches running` +
    (total ? `, ${done}/${total} of their samples done` : '') +
    (rate ? ` (${rate.toFixed(1)}/s in all)` : '') +
    (retried ? ` [${retried} on a later attempt]` : '')
  );
}
