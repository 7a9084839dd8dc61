/**
 * What moving a finished hidden-state dump out of the RAM dump dir costs per sample, on
 * LocalHost and on SshHost over a real loopback sshd (the tests' fixture), for many small
 * dump-sized files and a few large ones, from a tmpfs the bench mounts (as /dev/shm is on a
 * GPU host) to the disk ("cross"), or within one disk ("same").
 *
 *   npx tsx bench/extract-move.ts [--files 2000] [--size 65536] [--large 6] [--large-size 8388608]
 *                                 [--concurrency 8] [--paths before,after] [--hosts local,ssh] [--layouts cross,same]
 *
 * before: what the extract driver did per sample: `host.exec(['mv', '--', src, dst])`, then
 * a stat of dst, from `concurrency` workers at once.
 * after: the driver now: DumpMover batches (Host.moveFiles) while the workers go on, then a
 * stat of each dst.
 * Every file is checked at its destination (size) and the dump dir must end empty.
 * Reports wall time / files (what a sample pays, amortised) and each file's latency.
 */
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { Host } from '../src/hosts/host.js';
import { LocalHost } from '../src/hosts/local.js';
import { startSshFixture, type SshFixture } from '../test/support/ssh-fixture.js';
import { mountTmpfs, type Tmpfs } from '../test/support/tmpfs.js';
import { MOVE_PATHS, type MovePath } from './extract-move-paths.js';

const { values } = parseArgs({
  options: {
    files: { type: 'string', default: '2000' },
    size: { type: 'string', default: '65536' },
    large: { type: 'string', default: '6' },
    'large-size': { type: 'string', default: String(8 << 20) },
    concurrency: { type: 'string', default: '8' },
    paths: { type: 'string', default: Object.keys(MOVE_PATHS).join(',') },
    hosts: { type: 'string', default: 'local,ssh' },
    layouts: { type: 'string', default: 'cross,same' },
  },
});
const list = (s: string | undefined): string[] => (s ?? '').split(',').map((x) => x.trim()).filter(Boolean);
const concurrency = Number(values.concurrency);
const sets = [
  { name: 'small', files: Number(values.files), size: Number(values.size) },
  { name: 'large', files: Number(values.large), size: Number(values['large-size']) },
].filter((s) => s.files > 0);

/** The q-quantile (0..1) of sorted values, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

interface Row {
  host: string;
  layout: string;
  set: string;
  path: string;
  files: number;
  totalMs: number;
  latencies: number[];
}

async function makeSources(dir: string, n: number, size: number): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const names = Array.from({ length: n }, (_, i) => `s${String(i).padStart(6, '0')}.hs`);
  const data = Buffer.alloc(size, 7);
  for (const name of names) await writeFile(join(dir, name), data);
  return names;
}

async function checkLanded(srcDir: string, dstDir: string, names: string[], size: number): Promise<void> {
  const left = await readdir(srcDir);
  if (left.length > 0) throw new Error(`${left.length} files left in the dump dir ${srcDir}`);
  for (const name of names) {
    const st = await stat(join(dstDir, name));
    if (st.size !== size) throw new Error(`${dstDir}/${name} has ${st.size} bytes, expected ${size}`);
  }
  const extra = (await readdir(dstDir)).filter((n) => !names.includes(n));
  if (extra.length > 0) throw new Error(`unexpected files in ${dstDir}: ${extra.slice(0, 5).join(', ')}`);
}

async function runOne(host: Host, path: MovePath, srcDir: string, dstDir: string, set: (typeof sets)[number]): Promise<Omit<Row, 'host' | 'layout' | 'set' | 'path'>> {
  await rm(dstDir, { recursive: true, force: true });
  await mkdir(dstDir, { recursive: true });
  const names = await makeSources(srcDir, set.files, set.size);
  const latencies: number[] = [];
  const started = performance.now();
  await path.run({ host, concurrency, moves: names.map((n) => ({ from: join(srcDir, n), to: join(dstDir, n), bytes: set.size })), latencies });
  const totalMs = performance.now() - started;
  await checkLanded(srcDir, dstDir, names, set.size);
  await rm(dstDir, { recursive: true, force: true });
  return { files: set.files, totalMs, latencies };
}

function print(r: Row): void {
  const sorted = r.latencies.slice().sort((a, b) => a - b);
  const f = (v: number) => v.toFixed(2).padStart(9);
  console.log(
    [r.host.padEnd(5), r.layout.padEnd(5), `${r.set}×${r.files}`.padEnd(11), r.path.padEnd(6), f(r.totalMs / 1000), f(r.totalMs / r.files), f(quantile(sorted, 0.5)), f(quantile(sorted, 0.99))].join(' '),
  );
}

const root = await mkdtemp(join(tmpdir(), 'aerie-bench-move-'));
let tmpfs: Tmpfs | null = null;
let fx: SshFixture | null = null;
try {
  const biggest = Math.max(...sets.map((s) => s.files * s.size));
  tmpfs = await mountTmpfs(root, Math.ceil(biggest / 2 ** 20) + 64);
  const hosts: { name: string; host: Host }[] = [];
  for (const name of list(values.hosts)) {
    if (name === 'local') hosts.push({ name, host: new LocalHost({ name: 'local', workdir: join(root, 'work-local') }) });
    else if (name === 'ssh') {
      fx = await startSshFixture();
      hosts.push({ name, host: fx.host() });
    } else throw new Error(`unknown host ${name} (local, ssh)`);
  }
  const layouts: Record<string, string> = { cross: tmpfs.path, same: join(root, 'shm-on-disk') };
  console.log(`# ${cpus().length} cpus, load ${loadavg().map((l) => l.toFixed(1)).join(' ')}, concurrency ${concurrency}`);
  console.log('host  from  set         path   total s  ms/file  latency p50  p99 (ms)');
  for (const { name, host } of hosts) {
    await host.mkdirp(host.workdir);
    for (const layout of list(values.layouts)) {
      const srcDir = layouts[layout];
      if (!srcDir) throw new Error(`unknown layout ${layout} (cross, same)`);
      for (const set of sets) {
        for (const p of list(values.paths)) {
          const path = MOVE_PATHS[p];
          if (!path) throw new Error(`unknown path ${p} (${Object.keys(MOVE_PATHS).join(', ')})`);
          const r = await runOne(host, path, srcDir, join(root, 'out', 'rows_0-2000'), set);
          print({ host: name, layout, set: set.name, path: p, ...r });
        }
      }
    }
    await host.close();
  }
} finally {
  await fx?.stop();
  await tmpfs?.unmount();
  await rm(root, { recursive: true, force: true });
}
