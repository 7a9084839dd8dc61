/** The generate stage's last step: merge every shard into the four outputs and the manifest. */
import { JsonlAppender, listShardFiles, type FileEntry } from '../common/index.js';
import {
  KINDS,
  OUTPUT_NAMES,
  type GenerateCounts,
  type GenerateJob,
  type GenerateManifest,
  type GenerateSummary,
} from './job.js';
import { mergeShards } from './merge.js';
import { specforgeRowText, type Status } from './plan.js';
import { rowKeyOfText } from './resume.js';

/**
 * Merge all shards into the four output files (input order) and check the accounting. A pool's
 * batches write shards of their own beside shards/ (`extraDirs`): merged with them, in order.
 */
export async function combine(
  job: GenerateJob,
  planned: Map<string, number>,
  input: number,
  inputSha: string,
  resumed: number,
  extraDirs: readonly string[] = [],
): Promise<GenerateSummary> {
  const { host } = job;
  const shardDir = `${job.outDir}/shards`;
  const shards: { kind: string; path: string; seq: number }[] = [];
  for (const [d, dir] of [shardDir, ...extraDirs].entries()) {
    // Seqs restart in every directory: the directory's place keeps "earlier wins" meaningful.
    for (const s of (await listShardFiles(host, dir, KINDS)).shards) shards.push({ ...s, seq: d * 1e9 + s.seq });
  }
  const taken = new Set<number>();
  const outputs = new Map<Status, JsonlAppender>();
  const written: Record<Status, number> = { ok: 0, error: 0, skipped: 0, rejected: 0 };
  try {
    for (const kind of KINDS) {
      const out = new JsonlAppender(host, `${job.outDir}/${OUTPUT_NAMES[kind]}`);
      outputs.set(kind, out);
      const sources = shards.filter((s) => s.kind === kind).map((s) => ({ path: s.path, order: s.seq }));
      // Rows outside this input (e.g. a smaller numSamples than a previous run) are not outputs.
      const lineOf = (text: string): number | null => {
        const key = rowKeyOfText(kind, text);
        return key === null ? null : (planned.get(key) ?? null);
      };
      const rewrite = kind === 'rejected' ? undefined : specforgeRowText;
      written[kind] = await mergeShards(host, sources, lineOf, taken, out, `${shardDir}/.merge`, rewrite);
    }
  } catch (err) {
    for (const o of outputs.values()) await o.discard();
    throw err;
  }
  const counts: GenerateCounts = { input, ...written };
  const accounted = counts.ok + counts.error + counts.skipped + counts.rejected;
  if (accounted !== counts.input || planned.size !== counts.input) {
    for (const o of outputs.values()) await o.discard();
    const missing: number[] = [];
    for (const lineNo of planned.values()) if (!taken.has(lineNo) && missing.length < 11) missing.push(lineNo);
    throw new Error(
      `generate incomplete: ok ${counts.ok} + error ${counts.error} + skipped ${counts.skipped} + rejected ` +
        `${counts.rejected} = ${accounted}, but the input has ${counts.input} lines; missing lines ` +
        `${missing.slice(0, 10).join(', ')}${missing.length > 10 ? ', …' : ''} (rerun to resume)`,
    );
  }
  const files: FileEntry[] = [];
  try {
    for (const kind of KINDS) files.push(await outputs.get(kind)!.commit());
  } catch (err) {
    // Committed outputs stay (a retry rewrites them from the shards); the rest hold space.
    for (const o of outputs.values()) await o.discard();
    throw err;
  }
  const manifest: GenerateManifest = {
    input: job.inputPath,
    inputSha256: inputSha,
    generation: { model: job.model, temperature: job.temperature, maxTokens: job.maxTokens },
    counts,
    files,
    shards: { dir: shardDir, files: shards.length, index: `${shardDir}/index.jsonl` },
  };
  await host.writeFileAtomic(`${job.outDir}/manifest.json`, JSON.stringify(manifest, null, 2) + '\n');
  return { counts, manifest, resumed };
}
