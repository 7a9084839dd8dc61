/**
 * The samples of an extraction and what is already done with them: ids.jsonl's rows, the
 * feature files earlier attempts left that still hold, the disk they need, which samples the
 * self-check keeps, and the dumps in the folder that are not ours. Shared by the capture and
 * the stock producer.
 */
import type { Host } from '../../hosts/host.js';
import { formatBytes, InsufficientSpaceError, streamLines } from '../common/index.js';
import { featureBytesPerToken } from './chat-tokens.js';
import { verifyOffline } from './offline-verify.js';
import { removeIfPresent } from './prefill.js';

export interface ExtractError {
  id?: string;
  line: number;
  error: string;
}

export interface Ref {
  id: string;
  line: number;
  tokens: number;
}

export interface Done {
  i: number;
  tokens: number;
  bytes: number;
}

/** The ids the capture can name a file after (py/aerie_hs/capture.py `_RID`); it writes nothing for any other. */
export const CAPTURE_RID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/** ids.jsonl's rows: what to extract and what tokens.py refused, by line. */
export async function readRefs(host: Host, idsPath: string): Promise<{ refs: Ref[]; errors: ExtractError[] }> {
  const refs: Ref[] = [];
  const errors: ExtractError[] = [];
  const seen = new Set<string>();
  for await (const { lineNo, text } of streamLines(host, idsPath)) {
    const row = JSON.parse(text) as { id: string | null; input_ids?: number[]; error?: string };
    if (row.error !== undefined || !Array.isArray(row.input_ids) || typeof row.id !== 'string') {
      errors.push({
        ...(typeof row.id === 'string' ? { id: row.id } : {}),
        line: lineNo,
        error: `tokens: ${row.error ?? 'no input_ids'}`,
      });
    } else if (!CAPTURE_RID.test(row.id)) {
      errors.push({
        id: row.id,
        line: lineNo,
        error:
          'id: the capture names each dump after the sample id, which must be 1-200 of [A-Za-z0-9._-] starting with a letter or digit',
      });
    } else if (seen.has(row.id)) {
      errors.push({ id: row.id, line: lineNo, error: 'id: a second sample with this id (one feature file per id)' });
    } else {
      seen.add(row.id);
      refs.push({ id: row.id, line: lineNo, tokens: row.input_ids.length });
    }
  }
  return { refs, errors };
}

/** Earlier attempts' files that still hold: named by the index, structurally sound, same token count. */
export async function finishedBefore(
  job: { host: Host; py: { python: string }; outDir: string; hiddenSize: number },
  refs: Ref[],
): Promise<Map<string, Done>> {
  const { host } = job;
  const done = new Map<string, Done>();
  const indexPath = `${job.outDir}/index.jsonl`;
  if (!(await host.stat(indexPath))) return done;
  const report = await verifyOffline(host, job.py.python, job.outDir, job.hiddenSize);
  // A file cut short or unreadable goes; the converter writes it again under its index.
  for (const bad of report.bad) await removeIfPresent(host, bad.path);
  const want = new Map(refs.map((r) => [r.id, r.tokens]));
  for await (const { text } of streamLines(host, indexPath)) {
    const row = JSON.parse(text) as { i: number; id: string; tokens: number };
    const file = report.ok.get(row.i);
    if (file && file.tokens === row.tokens && want.get(row.id) === row.tokens)
      done.set(row.id, { i: row.i, tokens: row.tokens, bytes: file.bytes });
    else done.delete(row.id);
  }
  return done;
}

export async function checkSpace(job: { host: Host; outDir: string; hiddenSize: number }, todo: Ref[]): Promise<void> {
  const tokens = todo.reduce((sum, r) => sum + r.tokens, 0);
  const needed = tokens * featureBytesPerToken(job.hiddenSize);
  const free = await job.host.freeBytes(job.outDir);
  if (needed > free) {
    throw new InsufficientSpaceError(
      needed,
      free,
      `extract needs ${formatBytes(needed)} (${needed} bytes: ${todo.length} samples, ${tokens} tokens × (8 × hidden ${job.hiddenSize} + 16)) in ` +
        `${job.outDir} on ${job.host.name}, but only ${formatBytes(free)} (${free} bytes) are free; free space or point the extraction at a larger disk`,
    );
  }
}

/** Which of the samples still to do are kept for the self-check: the first ones, then a spread. */
export function selfCheckPicks(
  todo: readonly string[],
  early: number,
  total: number,
): { early: Set<string>; all: Set<string> } {
  const first = todo.slice(0, early);
  const all = new Set(first);
  const rest = todo.length - first.length;
  const more = Math.max(0, total - first.length);
  if (rest > 0 && more > 0) {
    const step = rest / Math.min(more, rest);
    for (let k = 0; k < Math.min(more, rest); k++) all.add(todo[first.length + Math.floor(k * step)]!);
  }
  return { early: new Set(first), all };
}

/**
 * The capture also dumps requests that are not ours: SGLang's start-up warm-up (a uuid rid)
 * and each generating health probe (`HEALTH_CHECK_<uuid>`, sglang==0.5.23:srt/entrypoints/http_server.py:751-760).
 * They are RAM nobody converts: removed after each pass over the samples.
 */
export async function sweepForeign(host: Host, dumpDir: string, ours: Map<string, number>): Promise<void> {
  for (const f of await host.list(dumpDir).catch(() => [])) {
    const name = f.path.slice(f.path.lastIndexOf('/') + 1);
    const id = name.replace(/\.(safetensors|error\.json)$/, '');
    if (!f.isDirectory && id !== name && !ours.has(id)) await removeIfPresent(host, f.path).catch(() => undefined);
  }
}
