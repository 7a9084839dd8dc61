/**
 * The ways of moving a finished dump that bench/extract-move.ts compares. Each takes the
 * whole list of moves and `concurrency` workers' worth of parallelism, as the extract
 * driver has, and records each file's latency (start of its move to verified arrival).
 */
import type { Host } from '../src/hosts/host.js';
import { DumpMover } from '../src/stages/extract-mover.js';
import { runPool } from '../src/stages/generate-pool.js';

export interface MoveRun {
  host: Host;
  concurrency: number;
  moves: { from: string; to: string; bytes: number }[];
  latencies: number[];
}

export interface MovePath {
  run(r: MoveRun): Promise<void>;
}

async function verify(host: Host, to: string, bytes: number): Promise<void> {
  const st = await host.stat(to);
  if (!st || st.size !== bytes) throw new Error(`${to} has ${st ? st.size : 'no'} bytes after the move, expected ${bytes}`);
}

/** The driver before: one `mv` exec per sample (on SSH, through the exactly-once exec protocol), then a stat. */
const before: MovePath = {
  async run({ host, concurrency, moves, latencies }) {
    await runPool(
      moves,
      async (m) => {
        const t0 = performance.now();
        const mv = await host.exec(['mv', '--', m.from, m.to]);
        if (mv.code !== 0) throw new Error(`mv ${m.from} failed: ${mv.stderr}`);
        await verify(host, m.to, m.bytes);
        latencies.push(performance.now() - t0);
      },
      { concurrency },
    );
  },
};

/**
 * The driver now: workers queue each move with DumpMover (default batch size and linger)
 * and go on; one Host.moveFiles per batch, then a stat per file. Latency here includes the
 * wait for the batch to form, which the extraction does not sit through.
 */
const after: MovePath = {
  async run({ host, concurrency, moves, latencies }) {
    const mover = new DumpMover(host);
    const landing: Promise<void>[] = [];
    await runPool(
      moves,
      async (m) => {
        await mover.whenRoom();
        const t0 = performance.now();
        landing.push(mover.move(m).then(() => void latencies.push(performance.now() - t0)));
      },
      { concurrency },
    );
    await mover.drain();
    await Promise.all(landing);
  },
};

export const MOVE_PATHS: Record<string, MovePath> = { before, after };
