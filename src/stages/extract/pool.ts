/**
 * The patched-server extraction over a pool of servers (stages.extract.servers). The plan cuts
 * the regenerated samples into batch files; each batch is a whole extraction of its own
 * (runExtract: tokens, prefill, conversion, self-check, resume by id) into
 * hidden_states/pool/b-<n>/, on the filesystem the training host reads; the merge sums the
 * batches' manifests into one. SpecForge's trainers list the hidden-states folder recursively
 * (SpecForge@a6b6b023:specforge/runtime/data_plane/offline_reader.py:72-82 list_feature_files
 * for `specforge train`, specforge/data/preprocessing.py:376-391 list_local_files for the v0.2
 * scripts: os.walk, paths sorted), so the batches' files are their dataset as they lie; the
 * simulator's trainer walks the same way (sim/train/data.ts countHiddenStateFiles).
 */
import type { Host } from '../../hosts/host.js';
import { streamLines, writeJsonlFile, type FileEntry } from '../common/index.js';
import type { ExtractError } from './samples.js';
import type { ExtractManifest } from './server-driver.js';

export interface ExtractPoolPlan {
  samples: number;
  batchSize: number;
  batches: { index: number; firstLine: number; samples: number }[];
}

export interface ExtractPoolSummary {
  counts: { input: number; ok: number; error: number; resumed: number };
  totalTokens: number;
  totalBytes: number;
  batches: number;
  selfCheck: string;
}

export const extractPoolDir = (hiddenDir: string) => `${hiddenDir}/pool`;
const name = (index: number) => `b-${String(index).padStart(5, '0')}`;
export const extractBatchDir = (hiddenDir: string, index: number) => `${extractPoolDir(hiddenDir)}/${name(index)}`;
export const extractBatchSamples = (hiddenDir: string, index: number) =>
  `${extractPoolDir(hiddenDir)}/${name(index)}.jsonl`;

/** The regenerated samples cut into batch files of batchSizeFor(samples) lines, in order, each written whole. */
export async function planExtractPool(
  host: Host,
  dataPath: string,
  hiddenDir: string,
  batchSizeFor: (samples: number) => number,
): Promise<ExtractPoolPlan> {
  let samples = 0;
  for await (const _ of streamLines(host, dataPath)) samples++;
  const batchSize = batchSizeFor(samples);
  await host.mkdirp(extractPoolDir(hiddenDir));
  const plan: ExtractPoolPlan = { samples, batchSize, batches: [] };
  let lines: string[] = [];
  let first = 0;
  const flush = async () => {
    const index = plan.batches.length;
    await host.writeFileAtomic(extractBatchSamples(hiddenDir, index), lines.join('\n') + '\n');
    plan.batches.push({ index, firstLine: first, samples: lines.length });
    lines = [];
  };
  let n = 0;
  for await (const { text } of streamLines(host, dataPath)) {
    if (lines.length === 0) first = n + 1;
    lines.push(text);
    n++;
    if (lines.length === batchSize) await flush();
  }
  if (lines.length > 0) await flush();
  await host.writeFileAtomic(`${extractPoolDir(hiddenDir)}/plan.json`, JSON.stringify(plan) + '\n');
  return plan;
}

/**
 * One manifest and one error list for the whole pool. A batch without its manifest never
 * finished: the merge refuses rather than count a partial extraction as done.
 */
export async function combineExtractPool(host: Host, hiddenDir: string): Promise<ExtractPoolSummary> {
  const plan = JSON.parse(
    (await host.readFile(`${extractPoolDir(hiddenDir)}/plan.json`)).toString('utf8'),
  ) as ExtractPoolPlan;
  const counts = { input: 0, ok: 0, error: 0, resumed: 0 };
  let totalTokens = 0;
  let totalBytes = 0;
  const errors: ExtractError[] = [];
  const checks: string[] = [];
  const files: FileEntry[] = [];
  for (const b of plan.batches) {
    const dir = extractBatchDir(hiddenDir, b.index);
    const m = await host
      .readFile(`${dir}/manifest.json`)
      .then((d) => JSON.parse(d.toString('utf8')) as ExtractManifest)
      .catch(() => undefined);
    if (!m || m.counts.input !== b.samples)
      throw new Error(
        `extract pool: batch ${b.index} (${dir}) has ${m ? `${m.counts.input} samples, not ${b.samples}` : 'no manifest: it never finished'}; rerun to resume`,
      );
    counts.input += m.counts.input;
    counts.ok += m.counts.ok;
    counts.error += m.counts.error;
    counts.resumed += m.counts.resumed;
    totalTokens += m.totalTokens;
    totalBytes += m.totalBytes;
    checks.push(m.selfCheck.final);
    files.push(...m.files);
    // A batch numbers its errors by its own lines; the pool's list names the line of train.jsonl.
    const text = await host.readFile(`${dir}/extract_error.jsonl`).catch(() => Buffer.from(''));
    for (const line of text.toString('utf8').split('\n').filter(Boolean)) {
      const e = JSON.parse(line) as ExtractError;
      errors.push({ ...e, line: e.line > 0 ? e.line + b.firstLine - 1 : e.line });
    }
  }
  errors.sort((a, b) => a.line - b.line);
  const errorFile = await writeJsonlFile(host, `${hiddenDir}/extract_error.jsonl`, errors);
  const selfCheck = `${checks.length} batches checked; first: ${checks[0] ?? 'none'}`;
  const manifest = {
    layout: `specforge, one layout per batch: pool/b-<n>/rows_{g}-{g+G}/data_{i}.ckpt (index.jsonl in each maps i to the sample id); SpecForge reads the folder recursively`,
    counts,
    totalTokens,
    totalBytes,
    batches: plan.batches.length,
    batchSize: plan.batchSize,
    selfCheck,
    files: [errorFile, ...files],
  };
  await host.writeFileAtomic(`${hiddenDir}/manifest.json`, JSON.stringify(manifest, null, 2) + '\n');
  return { counts, totalTokens, totalBytes, batches: plan.batches.length, selfCheck };
}
