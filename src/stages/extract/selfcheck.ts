/**
 * The extraction self-check (py/aerie_hs/selfcheck.py) over the dumps kept aside for it: do the
 * final states through the target's lm_head predict the target's own tokens and its greedy
 * next token, are they post-norm, are the aux blocks three distinct live layers (and, with
 * torch on a small target, the configured ones)? Run on the first samples before the stage
 * commits to the rest, and on a spread of samples before it counts as good.
 *
 * Kept under `<out>/selfcheck/`: `dumps/<id>.safetensors` (copies made before conversion, in
 * `pending/` until the sample converted) and `rows/<id>.json` ({id, input_ids, loss_mask,
 * greedy_next}), one file per sample written atomically, so a write repeated after a dropped
 * connection changes nothing and a resumed run checks what earlier attempts kept too. Each
 * check assembles `ids.jsonl` and `greedy.jsonl` from them.
 */
import type { Host } from '../../hosts/host.js';
import { runAeriePy, type AeriePy } from '../common/index.js';
import type { TokenRow } from './prefill.js';

/** The states do not belong to these tokens or these layers: an operator must look, a retry would do the same. */
export class SelfCheckFailedError extends Error {
  constructor(
    readonly verdict: SelfCheckVerdict,
    message: string,
  ) {
    super(message);
    this.name = 'SelfCheckFailedError';
  }
}

export interface SelfCheckVerdict {
  ok: boolean;
  samples: number;
  messages: string[];
  checks: Record<string, { ok: boolean; messages: string[]; figures?: Record<string, unknown> }>;
}

export const selfCheckDir = (outDir: string): string => `${outDir}/selfcheck`;

/**
 * Copy a finished capture aside before the converter deletes it. It joins the checked set
 * only once its sample converted (commitKept); a sample the converter refused is an error row
 * of its own, not a self-check input (dropKept).
 */
export async function keepForSelfCheck(host: Host, outDir: string, dumpPath: string, id: string): Promise<void> {
  const dir = selfCheckDir(outDir);
  await host.mkdirp(`${dir}/pending`);
  // cp on the host, not read-and-write through the worker: the dump stays where it is.
  const r = await host.exec(['cp', '--', dumpPath, `${dir}/pending/${id}.safetensors`]);
  if (r.code !== 0) throw new Error(`cannot keep ${dumpPath} for the self-check on ${host.name}: ${r.stderr.trim()}`);
}

export async function commitKept(host: Host, outDir: string, row: TokenRow, greedyNext: number): Promise<void> {
  const dir = selfCheckDir(outDir);
  await host.mkdirp(`${dir}/dumps`);
  await host.mkdirp(`${dir}/rows`);
  const kept = `${dir}/dumps/${row.id}.safetensors`;
  // Done already when the copy is in place and the pending one gone (a call repeated after a drop).
  if ((await host.stat(`${dir}/pending/${row.id}.safetensors`)) || !(await host.stat(kept))) {
    await host.rename(`${dir}/pending/${row.id}.safetensors`, kept);
  }
  await host.writeFileAtomic(`${dir}/rows/${row.id}.json`, JSON.stringify({ ...row, greedy_next: greedyNext }));
}

/** ids.jsonl and greedy.jsonl for the check, from the kept rows (a few dozen files of ids). */
async function assembleInputs(host: Host, dir: string): Promise<number> {
  const files = (await host.list(`${dir}/rows`).catch(() => []))
    .filter((f) => f.path.endsWith('.json'))
    .sort((a, b) => a.path.localeCompare(b.path));
  const ids: string[] = [];
  const greedy: string[] = [];
  for (const f of files) {
    const { greedy_next, ...row } = JSON.parse((await host.readFile(f.path)).toString('utf8')) as TokenRow & {
      greedy_next: number;
    };
    ids.push(JSON.stringify(row));
    greedy.push(JSON.stringify({ id: row.id, greedy_next }));
  }
  await host.writeFileAtomic(`${dir}/ids.jsonl`, ids.map((l) => l + '\n').join(''));
  await host.writeFileAtomic(`${dir}/greedy.jsonl`, greedy.map((l) => l + '\n').join(''));
  return files.length;
}

export async function dropKept(host: Host, outDir: string, id: string): Promise<void> {
  const path = `${selfCheckDir(outDir)}/pending/${id}.safetensors`;
  if (await host.stat(path)) await host.remove(path);
}

/** One line naming the headline figures, for notes and the ledger. */
export function describeVerdict(v: SelfCheckVerdict): string {
  const t = v.checks.teacher?.figures as { agreement_next?: number | null; positions?: number } | undefined;
  const g = v.checks.greedy?.figures as { checked?: number; exact?: number; within_bf16?: number } | undefined;
  const parts = [`${v.samples} samples`];
  if (t?.agreement_next != null)
    parts.push(`next-token agreement ${t.agreement_next.toFixed(3)} over ${t.positions} positions`);
  if (g?.checked)
    parts.push(`greedy ${g.exact}/${g.checked} exact${g.within_bf16 ? ` (+${g.within_bf16} within bf16)` : ''}`);
  const ref = v.checks.reference?.figures as { skipped?: string } | undefined;
  if (v.checks.reference)
    parts.push(ref?.skipped ? `reference forward skipped (${ref.skipped})` : 'reference forward run');
  return parts.join(', ');
}

export interface SelfCheckJob {
  host: Host;
  py: AeriePy;
  outDir: string;
  modelPath: string;
  minAgreement: number;
  /** Check only the first N kept samples (the early check); all kept ones when absent. */
  samples?: number;
  /** Which check this is, for the message. */
  when: 'first samples' | 'before the stage counts as good';
}

export async function runSelfCheck(job: SelfCheckJob): Promise<SelfCheckVerdict> {
  const dir = selfCheckDir(job.outDir);
  if ((await assembleInputs(job.host, dir)) === 0) {
    throw new Error(
      `the extraction self-check (${job.when}) has no kept samples in ${dir}/rows: every sample it was to check failed or was done before the check's files were kept; rerun with a fresh output folder`,
    );
  }
  const args = [
    '--model',
    job.modelPath,
    '--dumps',
    `${dir}/dumps`,
    '--ids',
    `${dir}/ids.jsonl`,
    '--greedy',
    `${dir}/greedy.jsonl`,
    '--min-agreement',
    String(job.minAgreement),
  ];
  if (job.samples !== undefined) args.push('--samples', String(job.samples));
  const r = await runAeriePy(job.host, job.py, 'selfcheck', args, { okCodes: [0, 1, 2], timeoutMs: 60 * 60_000 });
  let verdict: SelfCheckVerdict;
  try {
    verdict = JSON.parse(r.stdout) as SelfCheckVerdict;
  } catch {
    throw new Error(
      `python -m aerie_hs.selfcheck on ${job.host.name} printed no verdict (exit ${r.code}): ${r.stderr.trim().slice(-500)}`,
    );
  }
  if (r.code === 2) {
    throw new Error(
      `python -m aerie_hs.selfcheck on ${job.host.name} refused its inputs: ${(verdict as { error?: string }).error ?? r.stdout.trim().slice(-500)}`,
    );
  }
  if (!verdict.ok || r.code !== 0) {
    const failed = Object.entries(verdict.checks ?? {})
      .filter(([, c]) => !c.ok)
      .map(([k]) => k);
    throw new SelfCheckFailedError(
      verdict,
      `the extraction self-check (${job.when}) failed ${failed.join(', ')} on ${verdict.samples} samples: ${verdict.messages.slice(0, 6).join('; ')}` +
        `${verdict.messages.length > 6 ? ` (+${verdict.messages.length - 6} more)` : ''}. The kept dumps and the verdict's inputs are in ${dir}`,
    );
  }
  return verdict;
}
