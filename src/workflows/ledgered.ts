/**
 * A stage whose finished work is recorded in the ledger on the host: skipped while the record
 * is still valid (same inputs, outputs unchanged), so a resumed run continues where it stopped.
 */
import type { LedgerCheck } from '../activities/ledger.js';
import type { StageName } from '../shared.js';
import { activities } from './activities.js';
import type { Run } from './context.js';

/** What a stage's body hands back: its result, the files the record vouches for, one line for humans. */
export interface StageWork<T> {
  result: T;
  outputs: string[];
  note: string;
}

export interface LedgeredOptions {
  /**
   * Stages before this one that exist only to serve it and leave nothing behind (deploy's
   * server is stopped once the benchmark has measured it), so they keep no record of their
   * own: this stage's record covers them. They are skipped with it, a retry from them forces
   * it, the first is entered in its place, and the body enters this stage itself.
   */
  servedBy?: StageName[];
  /** The board's note on entering; default: the ledger's reason to run. */
  entering?: string;
}

/** The body's result (or the recorded one, when skipped) with the inputs hash later stages chain on. */
export async function ledgered<T extends object>(
  run: Run,
  stage: StageName,
  upstream: string[],
  body: () => Promise<StageWork<T>>,
  opts: LedgeredOptions = {},
): Promise<T & { inputsHash: string }> {
  const { base, options, progress, operator } = run;
  const covered = [...(opts.servedBy ?? []), stage];
  const check: LedgerCheck = await activities.checkLedger.executeWithOptions(
    { ...options.short, summary: `ledger: is ${stage} already done?` },
    [{ ...base, stage, upstream }],
  );
  // A retry forces its stage and every later one, so the first covered stage decides for all.
  if (check.valid && check.record && !operator.forced(covered[0]!)) {
    for (const s of covered.slice(0, -1)) progress.finish(s, `not needed: ${stage} already done`, 'skipped');
    progress.finish(stage, `already done (${check.record.finishedAt}): ${check.record.note}`, 'skipped');
    return { ...(check.record.result as T), inputsHash: check.inputsHash };
  }
  progress.enter(covered[0]!, opts.entering ?? enteringNote(check));
  const { result, outputs, note } = await body();
  await activities.writeLedger.executeWithOptions({ ...options.short, summary: `ledger: record ${stage}` }, [
    { ...base, stage, inputsHash: check.inputsHash, outputs, result, note },
  ]);
  progress.finish(stage, note);
  return { ...result, inputsHash: check.inputsHash };
}

/**
 * Why the stage runs, when that says something: nothing on a first run (the CLI shows
 * "starting"), the reason on a redo. Feeds only the status query and current details, never a
 * command, so recorded histories replay unchanged.
 */
function enteringNote(check: LedgerCheck): string | undefined {
  if (check.valid) return 'forced by the retry: redoing it';
  return check.reason === 'not done yet' ? undefined : `redoing: ${check.reason}`;
}
