/**
 * Will the run's files fit? Estimated from the generate input before anything runs, so a disk
 * too small is a problem now, not a full disk an hour into extraction.
 */
import type { Config } from '../config/schema.js';
import type { Host } from '../hosts/host.js';
import { estimatedBytesPerToken } from '../stages/extract/index.js';
import { formatBytes } from '../stages/common/index.js';
import { tryExec, type Findings } from './preflight-probes.js';

export interface DiskEstimate {
  tokens: number;
  /** Hidden states kept for training: tokens × 8 × hidden bytes. */
  hiddenBytes: number;
  /** The generated data set, about the size of the input. */
  dataBytes: number;
  /** What the dump dir holds at once: one longest sample per in-flight request. */
  dumpBytes: number;
}

/**
 * The disk a run needs, from the generate input: about 4 bytes of JSONL per token, only the
 * samples the run takes, and never more than max-length tokens per sample.
 */
export function estimateDisk(a: {
  inputBytes: number;
  inputLines: number;
  numSamples?: number;
  maxLength: number;
  hiddenSize: number;
  extractConcurrency: number;
}): DiskEstimate {
  const lines = Math.max(1, a.inputLines);
  const samples = Math.min(lines, a.numSamples ?? lines);
  const tokens = Math.min(Math.ceil((a.inputBytes * samples) / lines / 4), samples * a.maxLength);
  return {
    tokens,
    hiddenBytes: tokens * estimatedBytesPerToken(a.hiddenSize),
    dataBytes: Math.ceil((a.inputBytes * samples) / lines),
    dumpBytes: a.extractConcurrency * a.maxLength * estimatedBytesPerToken(a.hiddenSize),
  };
}

/** Free bytes where path is or will be (the nearest existing ancestor). */
async function freeAt(host: Host, path: string): Promise<{ at: string; free: number } | null> {
  for (let p = path; p.length > 0; p = p.slice(0, Math.max(p.lastIndexOf('/'), 0))) {
    const at = p || '/';
    if (await host.stat(at)) return { at, free: await host.freeBytes(at) };
    if (at === '/') break;
  }
  return null;
}

export async function checkDisk(
  host: Host,
  config: Config,
  root: string,
  hiddenSize: number | undefined,
  out: Findings,
): Promise<void> {
  const gen = config.stages.generate;
  const maxLength =
    (config.stages.extract as { 'max-length'?: number })['max-length'] ??
    (config.stages.train as { 'max-length'?: number })['max-length'] ??
    2048;
  const input = await host.stat(gen.input);
  if (!input || hiddenSize === undefined) return;
  const wc = await tryExec(host, ['wc', '-l', '--', gen.input]);
  const lines = Number(/^\s*(\d+)/.exec(wc.stdout)?.[1] ?? 1);
  const extract = config.stages.extract as { concurrency?: number; 'dump-dir'?: string };
  const est = estimateDisk({
    inputBytes: input.size,
    inputLines: lines,
    numSamples: gen['num-samples'],
    maxLength,
    hiddenSize,
    extractConcurrency: extract.concurrency ?? 1,
  });
  const work = await freeAt(host, root);
  const need = est.hiddenBytes + est.dataBytes;
  if (work && work.free < need) {
    out.problems.push(
      `disk: the run needs about ${formatBytes(need)} in ${root} on ${host.name} (hidden states ≈ ${est.tokens} tokens × 8 × hidden ${hiddenSize} = ${formatBytes(est.hiddenBytes)}, plus the data), ` +
        `but ${work.at} has ${formatBytes(work.free)} free. Fix: free space, or point hosts.${host.name}.workdir at a larger disk`,
    );
  } else if (work)
    out.checks.push(`disk: ${formatBytes(work.free)} free in ${work.at}, about ${formatBytes(need)} needed`);
  const dumpDir = extract['dump-dir'];
  if (dumpDir) {
    const dump = await freeAt(host, dumpDir);
    if (dump && dump.free < est.dumpBytes) {
      out.problems.push(
        `stages.extract.dump-dir: ${dumpDir} on ${host.name} needs room for ${extract.concurrency ?? 1} in-flight dumps of up to ${maxLength} tokens ` +
          `(${formatBytes(est.dumpBytes)}), but ${dump.at} has ${formatBytes(dump.free)} free. Fix: lower stages.extract.concurrency or use a larger RAM disk`,
      );
    } else if (dump) out.checks.push(`dump dir: ${formatBytes(dump.free)} free in ${dump.at}`);
  }
}
