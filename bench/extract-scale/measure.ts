/** What bench/extract-scale.ts measures around a run: CPU and memory from /proc, host commands, the `cp` peer. */
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { ExecOptions, ExecResult, Host } from '../../src/hosts/host.js';

const run = promisify(execFile);

export const secsSince = (t: number): number => (performance.now() - t) / 1000;

/** utime + stime of a process, in seconds (fields 14, 15 of /proc/<pid>/stat). */
export async function cpuSecs(pid: number | 'self', children = false): Promise<number> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const at = children ? 13 : 11; // after the comm field: utime is field 14 (index 11), cutime 16 (index 13)
  return (Number(f[at] ?? 0) + Number(f[at + 1] ?? 0)) / 100;
}

export async function vmKb(field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(await readFile('/proc/self/status', 'utf8'));
  return m ? Number(m[1]) : 0;
}

/** Time aerie's host commands by what they run, and count the file-existence checks (each one an exec over SSH). */
export function instrument(host: Host) {
  const busy = new Map<string, { n: number; secs: number; cpu: number }>();
  const stats = { n: 0 };
  const [exec, statFn] = [host.exec.bind(host), host.stat.bind(host)];
  const kind = (argv: string[]): string => {
    const m = /aerie_hs\.(\w+)/.exec(argv.join(' '));
    if (m) return m[1] === 'ckpt' && argv.includes('verify') ? 'ckpt verify' : m[1]!;
    return argv[0] === 'cp' ? 'cp (self-check copy)' : argv[0]!;
  };
  (host as { exec: Host['exec'] }).exec = async (argv: string[], opts?: ExecOptions): Promise<ExecResult> => {
    const [t, c0] = [performance.now(), await cpuSecs('self', true)];
    try {
      return await exec(argv, opts);
    } finally {
      const k = kind(argv);
      const b = busy.get(k) ?? { n: 0, secs: 0, cpu: 0 };
      b.n++;
      b.secs += secsSince(t);
      b.cpu += (await cpuSecs('self', true)) - c0;
      busy.set(k, b);
    }
  };
  (host as { stat: Host['stat'] }).stat = (p: string) => {
    stats.n++;
    return statFn(p);
  };
  return { busy, stats };
}

export async function ckptFiles(outDir: string): Promise<{ path: string; size: number }[]> {
  const files: { path: string; size: number }[] = [];
  for (const g of (await readdir(outDir)).filter((n) => n.startsWith('rows_'))) {
    for (const n of await readdir(join(outDir, g)))
      files.push({ path: join(outDir, g, n), size: (await stat(join(outDir, g, n))).size });
  }
  return files;
}

/** `cp` of the same files from tmpfs to the disk, chunk by chunk (staging untimed), with and without its sync. */
export async function cpPeer(
  files: { path: string; size: number }[],
  stage: string,
  dest: string,
  chunkBytes: number,
): Promise<{ bytes: number; cp: number; sync: number; cpu: number }> {
  let [cpu, bytes, cp, sync] = [0, 0, 0, 0];
  for (let k = 0, at = 0; at < files.length; k++) {
    const chunk: string[] = [];
    let size = 0;
    while (at < files.length && (chunk.length === 0 || size + files[at]!.size <= chunkBytes)) {
      chunk.push(files[at]!.path);
      size += files[at++]!.size;
    }
    const src = join(stage, `c${k}`);
    await mkdir(src, { recursive: true });
    await run('cp', ['--', ...chunk, src], { maxBuffer: 1 << 20 });
    await run('sync', ['-f', dest]);
    const [t, c0] = [performance.now(), await cpuSecs('self', true)];
    await run('cp', ['-r', '--', src, join(dest, `c${k}`)]);
    cp += secsSince(t);
    cpu += (await cpuSecs('self', true)) - c0;
    const t2 = performance.now();
    await run('sync', ['-f', dest]);
    sync += secsSince(t2);
    bytes += size;
    await rm(src, { recursive: true, force: true });
    await rm(join(dest, `c${k}`), { recursive: true, force: true });
  }
  return { bytes, cp, sync, cpu };
}

/** Seconds of the second 'extracting' phase: the bulk of the samples, between the two self-checks. */
export function bulkPhase(marks: { phase: string; at: number }[]): number {
  const ex = marks.filter((m) => m.phase === 'extracting').at(-1);
  const end = ex && marks.find((m) => m.phase === 'self-check' && m.at > ex.at);
  return ex && end ? end.at - ex.at : NaN;
}

export type Probe = ReturnType<typeof instrument>;
