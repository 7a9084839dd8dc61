/**
 * Which stages a sweep computes once for all its variants: the longest prefix of generate →
 * extract → train whose ledger inputs hash (src/ledger/record.ts, chained through the upstream
 * hashes as the pipeline chains them) is the same for every variant. Those stages would write
 * the same record in every variant's run, so one run makes them and the others read its outputs.
 */
import type { Config } from '../config/schema.js';
import { canonicalJson, inputsHash } from '../ledger/record.js';
import { SHAREABLE_STAGES, type ShareableStage } from '../shared.js';

export interface ShareDecision {
  /** The last stage computed once; none when the variants differ from generate on. */
  until?: ShareableStage;
  /** Each stage's inputs hash per variant, in variant order (what the decision was made from). */
  hashes: Record<ShareableStage, string[]>;
  /** One line for the terminal and the report: what is shared and why, or why nothing is. */
  reason: string;
}

/** The hash chain one run's ledger would compute: generate ← extract ← train. */
export function stageHashes(config: Config): Record<ShareableStage, string> {
  const generate = inputsHash(config, 'generate', []);
  const extract = inputsHash(config, 'extract', [generate]);
  const train = inputsHash(config, 'train', [extract]);
  return { generate, extract, train };
}

export function shareDecision(configs: readonly Config[]): ShareDecision {
  const chains = configs.map(stageHashes);
  const hashes = Object.fromEntries(
    SHAREABLE_STAGES.map((s) => [s, chains.map((c) => c[s])]),
  ) as ShareDecision['hashes'];
  // Shared outputs are files on the target host: variants on other hosts (or another workdir) cannot read them.
  const where = new Set(configs.map((c) => canonicalJson([c.target.host, c.hosts[c.target.host]])));
  if (where.size > 1) {
    return { hashes, reason: 'nothing shared: the variants run on different target hosts or workdirs' };
  }
  let until: ShareableStage | undefined;
  for (const s of SHAREABLE_STAGES) {
    if (new Set(hashes[s]).size !== 1) break;
    until = s;
  }
  if (!until) return { hashes, reason: 'nothing shared: the variants differ in what generate makes' };
  const shared = SHAREABLE_STAGES.slice(0, SHAREABLE_STAGES.indexOf(until) + 1);
  const next = SHAREABLE_STAGES[shared.length];
  return {
    until,
    hashes,
    reason:
      `${shared.join(', ')} computed once for all variants (the same ledger inputs hash in each)` +
      (next ? `; ${next} differs` : '; only deploy and benchmark differ'),
  };
}
