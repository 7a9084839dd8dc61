/**
 * The operator's hand on a run that waits after a failure (run.on-failure: wait): `aerie retry`
 * sends the retry update, naming the stage to restart from (default: the failed one); from
 * there on, stages run again even where the ledger says they are done.
 */
import { condition, defineUpdate, setHandler } from '@temporalio/workflow';
import { STAGES, type RetryRequest, type StageName } from '../shared.js';

/** Operator action after a failure the run waits on: re-run from the failed stage, or an earlier one. */
export const retryUpdate = defineUpdate<string, [RetryRequest]>('retry');

export class Operator {
  /** Set while the run waits after a failure in this stage. */
  private waitingOn: StageName | undefined;
  /** Set by the retry update: where the waiting run restarts. */
  private retryFrom: StageName | undefined;
  /** The last retry's stage: it and every later stage are forced past their ledger records. */
  private forceFrom: StageName | undefined;

  /** Registers the retry update: call once, at the start of the workflow. */
  constructor(runId: string) {
    setHandler(
      retryUpdate,
      (req) => {
        this.retryFrom = req.stage ?? this.waitingOn!;
        return `retrying ${runId} from ${this.retryFrom}`;
      },
      {
        validator: (req) => {
          const waitingOn = this.waitingOn;
          if (!waitingOn)
            throw new Error(
              `run ${runId} is not waiting for an operator (it waits only after a failure, with run.on-failure: wait)`,
            );
          if (req.stage !== undefined && !STAGES.includes(req.stage))
            throw new Error(`unknown stage "${req.stage}"; stages: ${STAGES.join(', ')}`);
          if (req.stage !== undefined && STAGES.indexOf(req.stage) > STAGES.indexOf(waitingOn)) {
            throw new Error(`cannot retry from ${req.stage}: the run failed earlier, at ${waitingOn}`);
          }
        },
      },
    );
  }

  /** Whether an operator's retry asked for this stage to run again whatever its ledger record says. */
  forced(stage: StageName): boolean {
    return this.forceFrom !== undefined && STAGES.indexOf(stage) >= STAGES.indexOf(this.forceFrom);
  }

  /** Waits for the retry update after a failure in `stage`; returns the stage to restart from. */
  async awaitRetry(stage: StageName): Promise<StageName> {
    this.waitingOn = stage;
    await condition(() => this.retryFrom !== undefined);
    const from = this.retryFrom!;
    this.forceFrom = from;
    this.waitingOn = undefined;
    this.retryFrom = undefined;
    return from;
  }
}
