/** Ledger activities: read and write a stage's record on its host. */
import type { Host } from '../hosts/host.js';
import { inputsHash, judgeLedger, parseLedgerRecord, type LedgerOutput, type LedgerRecord } from '../ledger/record.js';
import type { StageName } from '../shared.js';
import { runPaths, type ActivityDeps, type RunRef } from './context.js';

export interface LedgerCheck {
  valid: boolean;
  inputsHash: string;
  reason: string;
  record?: LedgerRecord;
}

/** Size (and file count for directories) of a path on the host, or null when absent. */
export async function measure(host: Host, path: string): Promise<{ bytes: number; count?: number } | null> {
  const st = await host.stat(path);
  if (!st) return null;
  if (!st.isDirectory) return { bytes: st.size };
  // find(1) runs on the host, so a directory of 100k dumps is measured where it lives.
  const r = await host.exec(['find', path, '-type', 'f', '-printf', '%s\\n']);
  if (r.code !== 0) throw new Error(`cannot measure ${path} on ${host.name}: ${r.stderr.trim()}`);
  const sizes = r.stdout.split('\n').filter(Boolean).map(Number);
  return { bytes: sizes.reduce((a, b) => a + b, 0), count: sizes.length };
}

async function sha256Of(host: Host, path: string): Promise<string> {
  const r = await host.exec(['sha256sum', '--', path]);
  if (r.code !== 0) throw new Error(`sha256sum ${path} failed on ${host.name}: ${r.stderr.trim()}`);
  return r.stdout.split(/\s+/)[0]!;
}

export function ledgerActivities({ hosts }: ActivityDeps) {
  return {
    async checkLedger(input: RunRef & { stage: StageName; upstream: string[] }): Promise<LedgerCheck> {
      const host = hosts.get(input.config);
      const hash = inputsHash(input.config, input.stage, input.upstream);
      const path = `${runPaths(host, input.runId).ledger}/${input.stage}.json`;
      const st = await host.stat(path);
      const record = st ? parseLedgerRecord((await host.readFile(path)).toString('utf8')) : null;
      const current = new Map<string, { bytes: number; count?: number } | null>();
      for (const out of record?.outputs ?? []) current.set(out.path, await measure(host, out.path));
      const verdict = judgeLedger(record, hash, current);
      return verdict.valid
        ? { valid: true, inputsHash: hash, reason: 'already done', record: record! }
        : { valid: false, inputsHash: hash, reason: verdict.reason };
    },

    async writeLedger(
      input: RunRef & { stage: StageName; inputsHash: string; outputs: string[]; result: unknown; note: string },
    ): Promise<LedgerRecord> {
      const host = hosts.get(input.config);
      const outputs: LedgerOutput[] = [];
      for (const path of input.outputs) {
        const m = await measure(host, path);
        if (!m) throw new Error(`stage ${input.stage} reported output ${path}, but it does not exist on ${host.name}`);
        outputs.push(
          m.count === undefined ? { path, bytes: m.bytes, sha256: await sha256Of(host, path) } : { path, ...m },
        );
      }
      const record: LedgerRecord = {
        stage: input.stage,
        inputsHash: input.inputsHash,
        outputs,
        result: input.result,
        note: input.note,
        finishedAt: new Date().toISOString(),
        runId: input.runId,
      };
      const dir = runPaths(host, input.runId).ledger;
      await host.mkdirp(dir);
      await host.writeFileAtomic(`${dir}/${input.stage}.json`, JSON.stringify(record, null, 2) + '\n');
      return record;
    },
  };
}
