/**
 * What the acceptance gate measures on, and the bar it holds the drafter to (issue 16 item 5).
 *
 * The gate's accept length is only a verdict on the drafter when its prompts are ones the
 * drafter never trained on: the generate stage's input rows after its first num-samples (the
 * benchmark's held-out pool). Where there are none (num-samples unset, or no row left), it
 * falls back to four fixed prompts and says so, because a figure on them cannot be compared
 * with another run's held-out one.
 */
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { parseLedgerRecord } from '../ledger/record.js';
import { readPromptRows } from '../bench/dataset.js';
import type { GateRecord } from '../shared.js';
import { runPaths } from './context.js';

export type { GateRecord } from '../shared.js';

export const FIXED_GATE_PROMPTS = [
  'Explain how a hash map works.',
  'Write a haiku about the sea.',
  'List three uses of binary search.',
  'Why is the sky blue?',
];

export interface GatePrompts {
  kind: 'held-out' | 'fixed';
  prompts: string[];
  /** Where they came from, in the words the report and the ledger keep. */
  source: string;
}

export async function gatePrompts(host: Host, config: Config): Promise<GatePrompts> {
  const g = config.stages.generate;
  const want = config.stages.deploy['acceptance-requests'];
  const skip = g['num-samples'];
  if (skip !== undefined) {
    const rows = await readPromptRows(host, g.input, skip, want).catch(() => []);
    if (rows.length > 0)
      return { kind: 'held-out', prompts: rows.map((r) => r.prompt), source: `${g.input} after row ${skip}` };
  }
  const why =
    skip === undefined
      ? 'stages.generate.num-samples is unset, so no input row is held out'
      : `no row of ${g.input} after the first ${skip}`;
  return { kind: 'fixed', prompts: FIXED_GATE_PROMPTS, source: `four fixed prompts (${why})` };
}

/** The bar: the configured threshold, raised to run X's gate less the margin when the config names X. */
export function gateFloor(
  threshold: number,
  versus: { run: string; margin: number; acceptLength: number } | undefined,
): { floor: number; from: string } {
  const own = { floor: threshold, from: `stages.deploy.acceptance-threshold ${threshold}` };
  if (!versus) return own;
  const theirs = versus.acceptLength - versus.margin;
  return theirs > threshold
    ? { floor: theirs, from: `run ${versus.run}'s gate ${versus.acceptLength.toFixed(2)} − ${versus.margin}` }
    : own;
}

export class GateBaselineError extends Error {
  override readonly name = 'GateBaselineError';
}

/**
 * Run X's gate, read from X's benchmark ledger record on the same host (the gate is recorded
 * there once X's benchmark finished). Missing or older records are config errors: the field
 * named X, so the fix is the field.
 */
export async function recordedGate(host: Host, runId: string): Promise<GateRecord> {
  const path = `${runPaths(host, runId).ledger}/benchmark.json`;
  const field = 'stages.deploy.acceptance-versus.run';
  const text = await host.readFile(path).then(
    (b) => b.toString('utf8'),
    () => undefined,
  );
  if (text === undefined)
    throw new GateBaselineError(
      `${field}: run ${runId} has no finished benchmark on host ${host.name} (no ${path}); name a run whose benchmark finished on this host, or remove the field`,
    );
  const record = parseLedgerRecord(text);
  const gate = (record?.result as { gate?: GateRecord } | undefined)?.gate;
  if (!gate || typeof gate.acceptLength !== 'number')
    throw new GateBaselineError(
      `${field}: run ${runId}'s benchmark record (${path}) keeps no acceptance gate figure (it finished before aerie recorded one); name a later run, or remove the field`,
    );
  return gate;
}
