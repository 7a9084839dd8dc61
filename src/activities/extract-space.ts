/**
 * Before any extraction launch: will the hidden states fit? Asked on the host before a server
 * spends minutes loading the target, so a run that cannot finish is refused with the numbers.
 */
import type { Host } from '../hosts/host.js';
import {
  featureBytesPerToken,
  tokenizeSamples,
  estimateOfflineTokens,
  offlineBytesNeeded,
} from '../stages/extract/index.js';
import { shipAeriePy, streamLines, formatBytes } from '../stages/common/index.js';
import { fatal, keepHeartbeating, runPaths, type ActivityDeps, type RunRef } from './context.js';
import { extractFailure, modelHiddenSize, offlineTokenizer } from './extract.js';

/** Bytes already under dir (what a resumed extraction does not need again), measured on the host. */
async function bytesUnder(host: Host, dir: string): Promise<number> {
  if (!(await host.stat(dir))) return 0;
  const r = await host.exec(['find', dir, '-type', 'f', '-printf', '%s\\n']);
  return r.code === 0
    ? r.stdout
        .split('\n')
        .filter(Boolean)
        .reduce((s, n) => s + Number(n), 0)
    : 0;
}

export function extractSpaceActivities({ hosts }: ActivityDeps) {
  return {
    /**
     * The estimate is the samples' tokens times the feature bytes per token, minus what is already
     * extracted. The server drivers count with the target's own tokenizer (its ids are kept for the
     * extraction); specforge-offline estimates SpecForge's tokens, padded as its batches pad them.
     */
    async checkExtractSpace(
      input: RunRef & { dataPath: string },
    ): Promise<{ neededBytes: number; freeBytes: number; note: string }> {
      const { config, runId } = input;
      const host = hosts.get(config);
      const e = config.stages.extract;
      const hiddenSize = e['hidden-size'] ?? (await modelHiddenSize(host, config.target['model-path']));
      const outDir = runPaths(host, runId).hidden;
      const stopBeat = keepHeartbeating(() => ({ phase: 'estimating' }));
      let rows: number[];
      let tokens: number;
      let bytes: number;
      let how = 'whitespace words as tokens';
      try {
        if (e.driver === 'specforge-offline') {
          const est = await estimateOfflineTokens(host, input.dataPath, e['max-length'], offlineTokenizer(config));
          rows = est.tokens;
          how = est.how;
          ({ tokens, bytes } = offlineBytesNeeded(rows, rows.length, e['batch-size'], hiddenSize));
        } else {
          // The exact tokens, made now (before any server loads) and reused by the extraction.
          const py = await shipAeriePy(host, e.python);
          const t = await tokenizeSamples({
            host,
            py,
            samplesPath: input.dataPath,
            outDir,
            modelPath: config.target['model-path'],
            chatTemplate: e['chat-template'],
            maxLength: e['max-length'],
            crossCheck: e['cross-check'],
            trustRemoteCode: config.server['extra-args'].includes('--trust-remote-code'),
          });
          rows = [];
          for await (const { text } of streamLines(host, t.idsPath)) {
            const row = JSON.parse(text) as { input_ids?: unknown[] };
            if (Array.isArray(row.input_ids)) rows.push(row.input_ids.length);
          }
          tokens = rows.reduce((a, b) => a + b, 0);
          bytes = tokens * featureBytesPerToken(hiddenSize);
          how = `tokens from the target's tokenizer (${t.method}), 8 × hidden + 16 bytes each`;
        }
      } catch (err) {
        throw extractFailure(err);
      } finally {
        stopBeat();
      }
      const needed = Math.max(0, bytes - (await bytesUnder(host, outDir)));
      await host.mkdirp(outDir);
      const free = await host.freeBytes(outDir);
      if (needed > free) {
        throw fatal(
          'InsufficientSpace',
          `extract needs about ${formatBytes(needed)} (${needed} bytes: ${rows.length} samples, ~${tokens} tokens × 8 × hidden ${hiddenSize}; ${how}) in ${outDir} on ${host.name}, ` +
            `but only ${formatBytes(free)} (${free} bytes) are free; free space or point the extraction at a larger disk`,
          { neededBytes: needed, freeBytes: free },
        );
      }
      return {
        neededBytes: needed,
        freeBytes: free,
        note: `~${formatBytes(needed)} needed, ${formatBytes(free)} free`,
      };
    },
  };
}
