/**
 * A drafter sweep (`aerie sweep`): several variants of one config as child `pipeline` runs of
 * one parent. The stages whose ledger inputs are the same in every variant (the CLI decides,
 * src/cli/sweep-share.ts) run once, in a shared run that stops after the last of them; then
 * every variant runs in parallel from there, reading the shared run's results. Each child holds
 * its own GPU lease, so on one host the leases take them one at a time.
 */
import {
  CancellationScope,
  ParentClosePolicy,
  defineQuery,
  executeChild,
  isCancellation,
  setHandler,
} from '@temporalio/workflow';
import type { Config } from '../config/schema.js';
import type { PipelineInput, PipelineResult, ShareableStage, SharedStages } from '../shared.js';
import { failureMessage } from './failure.js';
import { pipeline } from './pipeline.js';
import { AerieLabel, AerieStage, AerieTarget } from './search-attributes.js';

export interface SweepVariantInput {
  label: string;
  runId: string;
  config: Config;
}

export interface SweepInput {
  sweepId: string;
  configPath: string;
  /** The run that computes the shared stages, and the last of them; absent when nothing is shared. */
  shared?: { runId: string; until: ShareableStage; config: Config };
  variants: SweepVariantInput[];
}

export type ChildState = 'pending' | 'running' | 'completed' | 'failed' | 'cancelled';

export interface SweepChildStatus {
  label: string;
  runId: string;
  state: ChildState;
  error?: string;
}

export interface SweepStatus {
  sweepId: string;
  shared?: SweepChildStatus & { until: ShareableStage };
  variants: SweepChildStatus[];
}

export interface SweepResult extends SweepStatus {
  /** Per variant, in order: its pipeline result when it completed. */
  results: (PipelineResult | null)[];
}

export const sweepStatusQuery = defineQuery<SweepStatus>('sweepStatus');

export async function drafterSweep(input: SweepInput): Promise<SweepResult> {
  const status: SweepStatus = {
    sweepId: input.sweepId,
    ...(input.shared
      ? { shared: { label: 'shared stages', runId: input.shared.runId, state: 'pending', until: input.shared.until } }
      : {}),
    variants: input.variants.map((v) => ({ label: v.label, runId: v.runId, state: 'pending' })),
  };
  setHandler(sweepStatusQuery, () => status);

  let shared: SharedStages | undefined;
  if (input.shared && status.shared) {
    const { until, config } = input.shared;
    // No variant can start without them: the shared run's failure is the sweep's.
    const r = await child(status.shared, input, config, { until }, `stages up to ${until}, shared by every variant`, {
      rethrow: true,
    });
    shared = r?.shared;
  }
  const results = await Promise.all(
    input.variants.map((v, i) =>
      child(status.variants[i]!, input, v.config, shared ? { shared } : {}, `variant ${v.label}`),
    ),
  );
  return { ...status, results };
}

/**
 * One child run to its end, its state kept on the sweep's board. A variant that fails or is
 * cancelled on its own leaves the others running; cancelling the sweep cancels every child.
 */
async function child(
  entry: SweepChildStatus,
  sweep: SweepInput,
  config: Config,
  extra: Pick<PipelineInput, 'until' | 'shared'>,
  what: string,
  opts: { rethrow?: boolean } = {},
): Promise<PipelineResult | null> {
  entry.state = 'running';
  try {
    const r = await executeChild(pipeline, {
      workflowId: entry.runId,
      args: [{ runId: entry.runId, config, configPath: sweep.configPath, ...extra }],
      // A sweep ended by terminate or timeout still asks its runs to stop their servers and jobs.
      parentClosePolicy: ParentClosePolicy.REQUEST_CANCEL,
      typedSearchAttributes: [
        { key: AerieStage, value: 'preflight' },
        { key: AerieTarget, value: basename(config.target['model-path']) },
        { key: AerieLabel, value: config.run.label },
      ],
      staticSummary: `sweep ${sweep.sweepId}: ${what}`,
    });
    entry.state = 'completed';
    return r;
  } catch (err) {
    if (isCancellation(err) && CancellationScope.current().consideredCancelled) throw err;
    entry.state = isCancellation(err) ? 'cancelled' : 'failed';
    entry.error = failureMessage(err);
    if (opts.rethrow) throw err;
    return null;
  }
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}
