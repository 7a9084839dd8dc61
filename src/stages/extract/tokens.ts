/**
 * The extract stage's first step: every regenerated sample's `input_ids` and `loss_mask`,
 * made on the host by py/aerie_hs/tokens.py with the target's own tokenizer and chat
 * template, the way SpecForge's preprocessing makes them (and checked against SpecForge's own
 * function where it is importable there). Offline SpecForge trains on exactly these ids, so
 * the server is prefilled with them rather than with text it would tokenize its own way.
 *
 * `<out>/ids.jsonl` is reused while the samples, the model and the settings are unchanged
 * (`<out>/ids.meta.json` records them); otherwise it is made again under a temp name.
 */
import type { Host } from '../../hosts/host.js';
import { shJoin } from '../../hosts/index.js';
import { runAeriePy, type AeriePy, digestLines } from '../common/index.js';

export interface TokensJob {
  host: Host;
  py: AeriePy;
  samplesPath: string;
  outDir: string;
  modelPath: string;
  chatTemplate: string;
  maxLength: number;
  crossCheck: 'auto' | 'require' | 'off';
  trustRemoteCode: boolean;
}

export interface TokensSummary {
  idsPath: string;
  /** tokens.py's own counts: lines, ok, errors (conversations it refused), malformed (no sample at all). */
  counts: { lines: number; ok: number; errors: number; malformed: number };
  /** aerie (own implementation only) or aerie+specforge (SpecForge's function agreed). */
  method: string;
  reused: boolean;
}

/** SpecForge's preprocessing and aerie's gave different ids or masks: nothing is written, and retrying cannot help. */
export class TokensDisagreeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TokensDisagreeError';
  }
}

interface IdsMeta {
  samplesSha256: string;
  modelPath: string;
  chatTemplate: string;
  maxLength: number;
  aeriePy: string;
  counts: TokensSummary['counts'];
  method: string;
}

/** tokens.py's last stderr line: {"aerie_tokens": {...}}. */
export function parseTokensSummary(stderr: string): { counts: TokensSummary['counts']; method: string } | null {
  const lines = stderr.trim().split('\n');
  for (let i = lines.length - 1; i >= 0; i--) {
    try {
      const row = JSON.parse(lines[i]!) as { aerie_tokens?: Record<string, unknown> };
      const t = row.aerie_tokens;
      if (t && typeof t === 'object') {
        const n = (k: string): number => (typeof t[k] === 'number' ? (t[k] as number) : 0);
        return {
          counts: { lines: n('lines'), ok: n('ok'), errors: n('errors'), malformed: n('malformed') },
          method: String(t.method ?? 'aerie'),
        };
      }
    } catch {
      // not the summary line
    }
  }
  return null;
}

export async function tokenizeSamples(job: TokensJob): Promise<TokensSummary> {
  const { host } = job;
  const idsPath = `${job.outDir}/ids.jsonl`;
  const metaPath = `${job.outDir}/ids.meta.json`;
  const { sha256 } = await digestLines(host, job.samplesPath);
  const want = {
    samplesSha256: sha256,
    modelPath: job.modelPath,
    chatTemplate: job.chatTemplate,
    maxLength: job.maxLength,
    aeriePy: job.py.version,
  };
  const old = await readMeta(host, metaPath);
  if (
    old &&
    (await host.stat(idsPath)) &&
    (Object.keys(want) as (keyof typeof want)[]).every((k) => old[k] === want[k])
  ) {
    return { idsPath, counts: old.counts, method: old.method, reused: true };
  }
  await host.mkdirp(job.outDir);
  const tmp = `${idsPath}.tmp`;
  const args = [
    '--model',
    job.modelPath,
    '--chat-template',
    job.chatTemplate,
    '--max-length',
    String(job.maxLength),
    '--cross-check',
    job.crossCheck,
  ];
  if (job.trustRemoteCode) args.push('--trust-remote-code');
  // stdin and stdout are files on the host: the samples never pass through the worker here.
  const script = `${shJoin([job.py.python, '-m', 'aerie_hs.tokens', ...args])} < ${shJoin([job.samplesPath])} > ${shJoin([tmp])}`;
  let r;
  try {
    r = await runAeriePy(host, job.py, 'tokens', [], { okCodes: [0, 3], timeoutMs: 4 * 60 * 60_000, shell: script });
  } catch (err) {
    await host.remove(tmp).catch(() => undefined);
    throw err;
  }
  if (r.code === 3) {
    await host.remove(tmp).catch(() => undefined);
    throw new TokensDisagreeError(
      `SpecForge's own preprocessing disagrees with aerie's tokens on ${host.name}: ${r.stderr.trim().slice(-800)}`,
    );
  }
  const summary = parseTokensSummary(r.stderr);
  if (!summary)
    throw new Error(
      `python -m aerie_hs.tokens on ${host.name} printed no summary line: ${r.stderr.trim().slice(-500)}`,
    );
  await host.rename(tmp, idsPath);
  const meta: IdsMeta = { ...want, counts: summary.counts, method: summary.method };
  await host.writeFileAtomic(metaPath, JSON.stringify(meta, null, 2) + '\n');
  return { idsPath, ...summary, reused: false };
}

async function readMeta(host: Host, path: string): Promise<IdsMeta | null> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8')) as IdsMeta;
  } catch {
    return null;
  }
}
