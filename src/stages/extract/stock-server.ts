/**
 * The stock-server producer: an unpatched SGLang 0.5.23 returns the hidden states over HTTP
 * (py/aerie_hs/CAPTURE.md "Stock path"), to aerie's client running on the host next to the
 * server (py/aerie_hs/stock_client.py), so the JSON floats never cross the SSH link. A server
 * returns either the aux states or the final one, so each sample takes two passes, one per
 * launch: `aux` leaves `<id>.aux.partial`, `final` merges it with the final rows into the
 * capture's own `<id>.safetensors`, which then goes the patched path's way (converter,
 * self-check). The client skips what a pass already wrote, so a retried batch resumes.
 */
import type { Host } from '../../hosts/host.js';
import {
  runAeriePy,
  type AeriePy,
  ServerUnreachableError,
  StageAbortedError,
  streamLines,
  toJsonl,
  writeJsonlFile,
} from '../common/index.js';
import type { TokenRow } from './prefill.js';
import type { ExtractJob, StockServer } from './server-job.js';
import { checkSpace, finishedBefore, readRefs, type ExtractError } from './samples.js';
import { tokenizeSamples } from './tokens.js';

export type StockOutcome = { id: string; ok: true; dump: boolean } | { id: string; ok: false; error: string };

/** The client's per-sample lines: PART (one pass written), OK (dump complete), SKIP, FAIL, REJECTED. */
export function parseStockLine(line: string): StockOutcome | null {
  const [head, reason] = line.split('\t');
  const w = head!.trim().split(' ');
  if (!w[1]) return null;
  switch (w[0]) {
    case 'PART':
      return { id: w[1], ok: true, dump: false };
    case 'OK':
      return { id: w[1], ok: true, dump: true };
    case 'SKIP':
      // `SKIP <id>`: the dump is already whole; `SKIP <id> <pass>`: this pass's part is.
      return { id: w[1], ok: true, dump: w[2] === undefined };
    case 'FAIL':
    case 'REJECTED':
      return { id: w[1], ok: false, error: `${w[0].toLowerCase()}: ${reason ?? ''}`.trim() };
    default:
      return null;
  }
}

export interface StockBatch {
  host: Host;
  py: AeriePy;
  server: StockServer;
  pass: 'aux' | 'final';
  rows: TokenRow[];
  dumpDir: string;
  hiddenSize: number;
  /** The SGLang capture ids (draft ids + 1) the aux server uses: recorded in each dump, not readable over HTTP. */
  captureIds: number[];
  /** Scratch files of this batch go here. */
  scratchDir: string;
}

/** One client run over a batch; the final pass also returns each sample's greedy token. */
export async function runStockBatch(
  b: StockBatch,
): Promise<{ outcomes: Map<string, StockOutcome>; greedy: Map<string, number> }> {
  const { host } = b;
  const stem = `${b.scratchDir}/.stock-${b.pass}-${process.pid}-${Date.now()}`;
  await host.mkdirp(b.scratchDir);
  await host.writeFileAtomic(`${stem}.jsonl`, toJsonl(b.rows));
  const args = [
    '--host',
    b.server.address,
    '--port',
    String(b.server.port),
    '--ids',
    `${stem}.jsonl`,
    '--dumps',
    b.dumpDir,
    '--pass',
    b.pass,
    '--hidden-size',
    String(b.hiddenSize),
    '--concurrency',
    String(b.server.concurrency),
  ];
  if (b.pass === 'aux') args.push('--aux-layers', JSON.stringify(b.captureIds));
  else args.push('--greedy', `${stem}.greedy.jsonl`);
  try {
    const r = await runAeriePy(host, b.py, 'stock_client', args, { okCodes: [0, 1, 3], timeoutMs: 4 * 60 * 60_000 });
    if (r.code === 3)
      throw new ServerUnreachableError(
        `http://${b.server.address}:${b.server.port}/generate (from ${host.name})`,
        new Error(
          r.stdout
            .trim()
            .split('\n')
            .find((l) => l.startsWith('ABORT')) ?? 'unreachable',
        ),
      );
    const outcomes = new Map<string, StockOutcome>();
    for (const line of r.stdout.split('\n')) {
      const o = parseStockLine(line);
      if (o && !outcomes.has(o.id)) outcomes.set(o.id, o);
    }
    const greedy = new Map<string, number>();
    if (b.pass === 'final' && (await host.stat(`${stem}.greedy.jsonl`))) {
      for (const line of (await host.readFile(`${stem}.greedy.jsonl`)).toString('utf8').split('\n').filter(Boolean)) {
        const g = JSON.parse(line) as { id: string; greedy_next: number };
        greedy.set(g.id, g.greedy_next);
      }
    }
    return { outcomes, greedy };
  } finally {
    await host.remove(`${stem}.jsonl`).catch(() => undefined);
    await host.remove(`${stem}.greedy.jsonl`).catch(() => undefined);
  }
}

export interface StockAuxSummary {
  samples: number;
  /** Samples whose aux part is written (this run or before), or whose feature file already exists. */
  ready: number;
  errors: number;
}

/**
 * The first pass: every sample not yet converted gets its aux states from the aux server. What
 * fails is recorded in `<out>/stock-aux-errors.jsonl` (the final pass names it); the rest waits
 * as `<id>.aux.partial` in the dump folder for the final pass.
 */
export async function runStockAux(
  job: ExtractJob & { stock: StockServer & { captureIds: number[] } },
): Promise<StockAuxSummary> {
  const { host } = job;
  await host.mkdirp(job.outDir);
  await host.mkdirp(job.dumpDir);
  const tokens = await tokenizeSamples({
    host,
    py: job.py,
    samplesPath: job.samplesPath,
    outDir: job.outDir,
    modelPath: job.modelPath,
    chatTemplate: job.chatTemplate,
    maxLength: job.maxLength,
    crossCheck: job.crossCheck,
    trustRemoteCode: job.trustRemoteCode,
  });
  const { refs } = await readRefs(host, tokens.idsPath);
  const finished = await finishedBefore(job, refs);
  const todo = refs.filter((r) => !finished.has(r.id));
  await checkSpace(job, todo);
  const want = new Set(todo.map((r) => r.id));
  const lineOf = new Map(todo.map((r) => [r.id, r.line]));
  const errors: ExtractError[] = [];
  let ready = finished.size;
  let batch: TokenRow[] = [];
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return;
    const { outcomes } = await runStockBatch({
      host,
      py: job.py,
      server: job.stock,
      pass: 'aux',
      rows: batch,
      dumpDir: job.dumpDir,
      hiddenSize: job.hiddenSize,
      captureIds: job.stock.captureIds,
      scratchDir: job.outDir,
    });
    for (const row of batch) {
      const o = outcomes.get(row.id);
      if (o?.ok) ready++;
      else
        errors.push({
          id: row.id,
          line: lineOf.get(row.id) ?? 0,
          error: `stock aux pass: ${o ? o.error : 'the stock client printed no line for this sample'}`,
        });
    }
    batch = [];
    job.onProgress?.({
      phase: 'extracting',
      done: ready + errors.length,
      total: refs.length,
      ok: ready,
      errors: errors.length,
      resumed: finished.size,
      bytes: 0,
      rate: 0,
    });
  };
  for await (const { text } of streamLines(host, tokens.idsPath)) {
    if (job.signal?.aborted) break;
    const row = JSON.parse(text) as Partial<TokenRow>;
    if (typeof row.id !== 'string' || !want.has(row.id) || !Array.isArray(row.input_ids)) continue;
    batch.push({ id: row.id, input_ids: row.input_ids, loss_mask: row.loss_mask ?? [] });
    if (batch.length >= (job.stock.batch ?? 64)) await flush();
  }
  await flush();
  await writeJsonlFile(host, `${job.outDir}/stock-aux-errors.jsonl`, errors);
  if (job.signal?.aborted)
    throw new StageAbortedError(
      'extract',
      `the aux pass stopped with ${ready} of ${refs.length} samples ready; rerun to resume`,
    );
  return { samples: refs.length, ready, errors: errors.length };
}
