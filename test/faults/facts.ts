/**
 * What a finished run left behind, gathered the same way after every fault case so it can be
 * compared with an uninterrupted reference run: launches, ledger, outputs, history.
 */
import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Client } from '@temporalio/client';

export interface RunFacts {
  launches: string[];
  ledger: Record<string, { finishedAt: string; inputsHash: string }>;
  /**
   * Deterministic outputs (relative path → sha256) that must match the reference byte for byte:
   * the data files and every feature file (aerie's .hs dumps, SpecForge's data_{i}.ckpt, whose
   * serialization_id the simulator derives from the content). The vocab mapping: its tensors.
   */
  outputs: Record<string, string>;
  /** How many times each activity type was scheduled (a retry is not a new scheduling). */
  scheduled: Record<string, number>;
  /** Heartbeat timeouts (ms) the workflow gave each activity type that has one. */
  heartbeatTimeouts: Record<string, number[]>;
  historyJson: string;
  status: string;
}

async function walk(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    const p = join(dir, e.name);
    if (e.isDirectory()) out.push(...(await walk(p)));
    else out.push(p);
  }
  return out;
}

const sha = async (p: string) =>
  createHash('sha256')
    .update(await readFile(p))
    .digest('hex');

/**
 * A torch.save zip by its members, without the archive's own name: SpecForge names the vocab
 * mapping's archive after a uuid4 temp key before renaming the file into place
 * (SpecForge@a6b6b023:scripts/prepare_hidden_states.py:244-245), so two runs' files differ in
 * those names (and the serialization_id torch derives per save) but must agree on every tensor.
 * Reads the stored (uncompressed) members torch writes, through the central directory.
 */
export async function torchZipDigest(p: string): Promise<string> {
  const b = await readFile(p);
  const eocd = b.lastIndexOf(Buffer.from([0x50, 0x4b, 0x05, 0x06]));
  if (eocd < 0) return `not a zip: ${createHash('sha256').update(b).digest('hex')}`;
  let count = b.readUInt16LE(eocd + 10);
  let at = b.readUInt32LE(eocd + 16);
  const z64 = b.lastIndexOf(Buffer.from([0x50, 0x4b, 0x06, 0x06]));
  if (z64 >= 0 && (count === 0xffff || at === 0xffffffff)) {
    count = Number(b.readBigUInt64LE(z64 + 32));
    at = Number(b.readBigUInt64LE(z64 + 48));
  }
  const h = createHash('sha256');
  for (let i = 0; i < count; i++) {
    const size = b.readUInt32LE(at + 20);
    const nameLen = b.readUInt16LE(at + 28);
    const name = b.subarray(at + 46, at + 46 + nameLen).toString('utf8');
    const local = b.readUInt32LE(at + 42);
    at += 46 + nameLen + b.readUInt16LE(at + 30) + b.readUInt16LE(at + 32);
    const member = name.slice(name.indexOf('/') + 1);
    if (member === '.data/serialization_id') continue;
    const data = local + 30 + b.readUInt16LE(local + 26) + b.readUInt16LE(local + 28);
    h.update(`${member}\0${size}\0`).update(b.subarray(data, data + size));
  }
  return `torch members ${h.digest('hex')}`;
}

export async function gatherFacts(client: Client, workdir: string, runId: string): Promise<RunFacts> {
  const root = join(workdir, 'runs', runId);
  const launches = (await readdir(join(workdir, '.aerie', 'procs')).catch(() => [] as string[]))
    .filter((f) => f.endsWith('.json') && f.startsWith(`${runId}.`))
    .map((f) => f.slice(runId.length + 1, -5))
    .sort();
  const ledger: RunFacts['ledger'] = {};
  for (const f of await readdir(join(root, '.aerie', 'ledger')).catch(() => [] as string[])) {
    const r = JSON.parse(await readFile(join(root, '.aerie', 'ledger', f), 'utf8')) as {
      finishedAt: string;
      inputsHash: string;
    };
    ledger[f.replace(/\.json$/, '')] = { finishedAt: r.finishedAt, inputsHash: r.inputsHash };
  }
  const outputs: Record<string, string> = {};
  const data = ['train.jsonl', 'train_error.jsonl', 'train_skipped.jsonl', 'train_rejected.jsonl'].map((f) =>
    join(root, 'data', f),
  );
  for (const p of data) {
    if (await stat(p).catch(() => null)) outputs[relative(root, p)] = await sha(p);
  }
  // aerie's converter numbers files in the order samples finish, so a file is compared by the
  // sample id its index gives it, and by its members (the archive inside is named data_<i>).
  const index = await readFile(join(root, 'hidden_states', 'index.jsonl'), 'utf8').catch(() => null);
  if (index !== null) {
    const files = await walk(join(root, 'hidden_states'));
    for (const line of index.split('\n').filter(Boolean)) {
      const { i, id } = JSON.parse(line) as { i: number; id: string };
      const g = files.find((p) => p.endsWith(`/data_${i}.ckpt`));
      if (g) outputs[`hidden_states/<id ${id}>.ckpt`] = await torchZipDigest(g);
    }
  } else {
    for (const p of (await walk(join(root, 'hidden_states'))).filter((f) => /\.ckpt$/.test(f)))
      outputs[relative(root, p)] = await sha(p);
  }
  const vocab = join(root, 'hidden_states', 'vocab_mapping', 'vocab_mapping.pt');
  if (await stat(vocab).catch(() => null)) outputs[relative(root, vocab)] = await torchZipDigest(vocab);
  const handle = client.workflow.getHandle(runId);
  const history = await handle.fetchHistory();
  const scheduled: Record<string, number> = {};
  const heartbeatTimeouts: Record<string, number[]> = {};
  for (const e of history.events ?? []) {
    const a = e.activityTaskScheduledEventAttributes;
    const name = a?.activityType?.name;
    if (!name) continue;
    scheduled[name] = (scheduled[name] ?? 0) + 1;
    const hb = a.heartbeatTimeout;
    const ms = hb ? Number(hb.seconds ?? 0) * 1000 + Math.round((hb.nanos ?? 0) / 1e6) : 0;
    if (ms > 0) (heartbeatTimeouts[name] ??= []).push(ms);
  }
  const desc = await handle.describe();
  return {
    launches,
    ledger,
    outputs,
    scheduled,
    heartbeatTimeouts,
    historyJson: JSON.stringify(history),
    status: desc.status.name,
  };
}

/** Launch ids (without the run prefix) that name a role more than once for the same generation: never allowed. */
export function duplicateLaunches(launches: string[]): number {
  return launches.length - new Set(launches).size;
}

/** Stages whose ledger record changed although they had finished before the fault. */
export function stagesRedone(before: RunFacts['ledger'], after: RunFacts['ledger']): string[] {
  return Object.keys(before).filter((s) => after[s]?.finishedAt !== before[s]!.finishedAt);
}

export function bytesDiffering(reference: RunFacts['outputs'], got: RunFacts['outputs']): string[] {
  const keys = new Set([...Object.keys(reference), ...Object.keys(got)]);
  return [...keys].filter((k) => reference[k] !== got[k]).sort();
}

/** Live processes in any of the given process groups (orphans after a run has ended). */
export async function liveInGroups(pgids: number[]): Promise<number[]> {
  const want = new Set(pgids);
  const live: number[] = [];
  for (const pid of await readdir('/proc').catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (fields[0] !== 'Z' && want.has(Number(fields[2]))) live.push(Number(pid));
  }
  return live;
}

export async function recordedGroups(workdir: string, runId: string): Promise<number[]> {
  const dir = join(workdir, '.aerie', 'procs');
  const out: number[] = [];
  for (const f of await readdir(dir).catch(() => [] as string[])) {
    if (!f.startsWith(`${runId}.`) || !f.endsWith('.json')) continue;
    out.push((JSON.parse(await readFile(join(dir, f), 'utf8')) as { pgid: number }).pgid);
  }
  return out;
}
