/** bench/extract-scale.ts's figures for one run, and how they are printed. */

export const MB = 1e6;
export const say = (s: string): void => void process.stdout.write(`${s}\n`);

export interface RunFigures {
  samples: number;
  tokens: number;
  bytes: number;
  wall: number;
  sync: number;
  cp: { cp: number; sync: number; bytes: number; cpu: number };
  rssStart: number;
  rssPeak: number;
  hwm: number;
  heapPeak: number;
  simCpu: number;
  selfCpu: number;
  busy: Map<string, { n: number; secs: number; cpu: number }>;
  stats: { n: number };
  phases: string;
  bulk: number;
  link?: { up: number; down: number };
}

/** `ssh`: host commands ran under sshd, so their CPU is not this process's children's and is left out. */
export function report(k: number, f: RunFigures, ssh: boolean): void {
  const mbs = (b: number, s: number) => (b / MB / s).toFixed(0);
  const rate = f.bytes / (f.wall + f.sync);
  const cpRate = f.cp.bytes / (f.cp.cp + f.cp.sync);
  say(
    `run ${k}: ${f.samples} samples, ${f.tokens} tokens (${(f.tokens / f.samples).toFixed(0)}/sample), ${(f.bytes / MB).toFixed(0)} MB of SpecForge files`,
  );
  say(
    `  extract: ${f.wall.toFixed(1)} s + sync ${f.sync.toFixed(1)} s → ${(f.samples / (f.wall + f.sync)).toFixed(1)} samples/s, ${mbs(f.bytes, f.wall + f.sync)} MB/s (${mbs(f.bytes, f.wall)} MB/s before the sync)`,
  );
  say(
    `  cp peer: ${(f.cp.bytes / MB).toFixed(0)} MB tmpfs → disk in ${f.cp.cp.toFixed(1)} s + sync ${f.cp.sync.toFixed(1)} s → ${mbs(f.cp.bytes, f.cp.cp + f.cp.sync)} MB/s (${mbs(f.cp.bytes, f.cp.cp)} MB/s before the sync)`,
  );
  say(
    `  extract / cp: ${((100 * rate) / cpRate).toFixed(0)}% (goal >= 80%); page-cache rates: ${((100 * (f.bytes / f.wall)) / (f.cp.bytes / f.cp.cp)).toFixed(0)}%`,
  );
  say(
    `  worker RSS: ${(f.rssStart / MB).toFixed(0)} MB at the start, peak ${(f.rssPeak / MB).toFixed(0)} MB (VmHWM since reset ${(f.hwm / MB).toFixed(0)} MB; JS heap+external peak ${(f.heapPeak / MB).toFixed(0)} MB) (goal < 300 MB)`,
  );
  const conv = f.busy.get('ckpt');
  if (conv)
    say(
      `  converter alone: ${(f.bytes / MB / conv.secs).toFixed(0)} MB/s over its ${conv.secs.toFixed(1)} s of wall (${((100 * f.bytes) / conv.secs / cpRate).toFixed(0)}% of cp+sync); bulk phase (between the self-checks) ${f.bulk.toFixed(1)} s → ${(f.bytes / MB / f.bulk).toFixed(0)} MB/s (${((100 * f.bytes) / f.bulk / cpRate).toFixed(0)}% of cp+sync)`,
    );
  say(
    `  CPU: cp ${f.cp.cpu.toFixed(1)} s; simulator ${f.simCpu.toFixed(1)} s, worker ${f.selfCpu.toFixed(1)} s; phases: ${f.phases}`,
  );
  for (const [k2, b] of [...f.busy].sort((a, b) => b[1].secs - a[1].secs)) {
    say(`  host command ${k2}: ${b.n}× ${b.secs.toFixed(1)} s wall${ssh ? '' : `, ${b.cpu.toFixed(1)} s CPU`}`);
  }
  say(`  host.stat calls: ${f.stats.n}`);
  if (f.link) {
    const carried = f.link.up + f.link.down;
    say(
      `  SSH link: ${(f.link.up / MB).toFixed(2)} MB up, ${(f.link.down / MB).toFixed(2)} MB down = ${(carried / MB).toFixed(2)} MB for ${(f.bytes / MB).toFixed(0)} MB of states written: ${((100 * carried) / f.bytes).toFixed(3)}%`,
    );
  }
}
