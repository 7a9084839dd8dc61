/**
 * Pure arithmetic and bookkeeping for hidden-state extraction: where each sample's file
 * goes, how big it must be, how much disk the stage needs, and which samples are valid.
 */
import { estimateTokens, parseSampleLine, renderForExtraction, unsafeIdReason } from './conversations.js';
import type { NumberedLine } from './jsonl.js';

/** SpecForge groups files 2000 samples per directory (--file-group-size 2000). */
export const FILE_GROUP_SIZE = 2000;

/** `rows_{k*2000}-{(k+1)*2000}` for the k-th group, by 0-based sample index. */
export function shardDirName(index: number, groupSize = FILE_GROUP_SIZE): string {
  const k = Math.floor(index / groupSize);
  return `rows_${k * groupSize}-${(k + 1) * groupSize}`;
}

/** The patched server's dump: three auxiliary layers × hiddenSize bf16 values per prompt token. */
export function expectedDumpBytes(promptTokens: number, hiddenSize: number): number {
  return promptTokens * 3 * hiddenSize * 2;
}

/**
 * Planning figure per token: 8·H bytes (aux 3H + final H, bf16), as specforge.md gives it.
 * Deliberately the larger SpecForge figure, not the dump's 6·H, so a later conversion fits too.
 */
export function estimatedBytesPerToken(hiddenSize: number): number {
  return 8 * hiddenSize;
}

export interface ExtractItem {
  /** 0-based index among the samples file's non-blank lines: decides the shard directory. */
  index: number;
  lineNo: number;
  id: string;
  text: string;
  estTokens: number;
  /** Path relative to outDir: `<shard>/<id>.hs`. */
  file: string;
}

export interface ExtractError {
  id?: string;
  line: number;
  error: string;
}

/** A planned sample without its text: what a resume check and the disk estimate need, kept for all samples. */
export type ExtractRef = Omit<ExtractItem, 'text'> & { textSha256: string };

/** Plans one line at a time (by its 0-based index among non-blank lines), remembering only ids seen. */
export class ExtractPlanner {
  private readonly seen = new Set<string>();

  plan({ lineNo, text: raw }: NumberedLine, index: number): { item: ExtractItem } | { error: ExtractError } {
    const parsed = parseSampleLine(raw);
    if (!parsed.ok) return { error: { line: lineNo, error: parsed.reason } };
    const { id } = parsed.sample;
    const unsafe = unsafeIdReason(id);
    if (unsafe) return { error: { id, line: lineNo, error: unsafe } };
    // Two samples with one id would share one file name.
    if (this.seen.has(id)) return { error: { id, line: lineNo, error: 'duplicate id' } };
    this.seen.add(id);
    const text = renderForExtraction(parsed.sample);
    return { item: { index, lineNo, id, text, estTokens: estimateTokens(text), file: `${shardDirName(index)}/${id}.hs` } };
  }
}

export function planExtract(lines: readonly NumberedLine[]): { items: ExtractItem[]; errors: ExtractError[] } {
  const items: ExtractItem[] = [];
  const errors: ExtractError[] = [];
  const planner = new ExtractPlanner();
  lines.forEach((line, index) => {
    const r = planner.plan(line, index);
    if ('item' in r) items.push(r.item);
    else errors.push(r.error);
  });
  return { items, errors };
}

/** One finished sample, as recorded in `<outDir>/index-<seq>.jsonl` and `index.jsonl`. */
export interface IndexEntry {
  id: string;
  index: number;
  file: string;
  tokens: number;
  bytes: number;
}

export function isIndexEntry(v: Record<string, unknown>): v is IndexEntry & Record<string, unknown> {
  return (
    typeof v.id === 'string' &&
    typeof v.index === 'number' &&
    typeof v.file === 'string' &&
    typeof v.tokens === 'number' &&
    typeof v.bytes === 'number'
  );
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}
