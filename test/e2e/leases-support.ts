/**
 * For the GPU-lease end-to-end tests: a timeline of the simulated GPU registry (which run's
 * processes held which GPU, sampled), and an aerie worker process on a task queue of its own,
 * so one run can lose its only worker while the other run's worker lives on.
 */
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { readHoldings } from '../../sim/gpu/registry.js';
import { spawnWorkerProcess } from '../support/worker-process.js';

interface Sample {
  at: number;
  /** GPU index → the runs whose processes hold it. */
  byGpu: Map<number, Set<string>>;
}

/**
 * Samples AERIE_SIM_GPU_DIR every `everyMs`; each live holder is named by its launch's run
 * (AERIE_LAUNCH in its environment, matched to the launch records under `procsDir`).
 */
export class GpuTimeline {
  readonly samples: Sample[] = [];
  private readonly runOfToken = new Map<string, string>();
  private timer?: NodeJS.Timeout;
  private busy = false;

  constructor(
    private readonly gpuDir: string,
    private readonly procsDir: string,
  ) {}

  start(everyMs = 100): void {
    this.timer = setInterval(() => {
      if (this.busy) return;
      this.busy = true;
      void this.sample().finally(() => (this.busy = false));
    }, everyMs);
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private async sample(): Promise<void> {
    const byGpu = new Map<number, Set<string>>();
    for (const h of readHoldings(this.gpuDir)) {
      const run = await this.runOf(h.pid);
      if (!run) continue;
      for (const g of h.gpus) byGpu.set(g, (byGpu.get(g) ?? new Set()).add(run));
    }
    this.samples.push({ at: Date.now(), byGpu });
  }

  private async runOf(pid: number): Promise<string | undefined> {
    const env = await readFile(`/proc/${pid}/environ`, 'utf8').catch(() => '');
    const token = env
      .split('\0')
      .find((e) => e.startsWith('AERIE_LAUNCH='))
      ?.slice('AERIE_LAUNCH='.length);
    if (!token) return undefined;
    if (!this.runOfToken.has(token)) {
      for (const f of (await readdir(this.procsDir).catch(() => [] as string[])).filter((n) => n.endsWith('.json'))) {
        const rec = JSON.parse(await readFile(join(this.procsDir, f), 'utf8').catch(() => '{}')) as {
          launchId?: string;
          token?: string;
        };
        // Launch ids are <runId>.<what>.<gen>.
        if (rec.token && rec.launchId) this.runOfToken.set(rec.token, rec.launchId.split('.').slice(0, -2).join('.'));
      }
    }
    return this.runOfToken.get(token);
  }

  /** Samples in which one GPU was held by processes of more than one run. */
  shared(): { at: number; gpu: number; runs: string[] }[] {
    return this.samples.flatMap((s) =>
      [...s.byGpu].filter(([, runs]) => runs.size > 1).map(([gpu, runs]) => ({ at: s.at, gpu, runs: [...runs] })),
    );
  }

  /** When a run's processes were first and last seen on any GPU; undefined if never. */
  span(run: string): { first: number; last: number } | undefined {
    const at = this.samples.filter((s) => [...s.byGpu.values()].some((r) => r.has(run))).map((s) => s.at);
    return at.length ? { first: at[0]!, last: at.at(-1)! } : undefined;
  }

  /** The GPUs a run's processes were seen on. */
  gpusOf(run: string): number[] {
    const gpus = new Set<number>();
    for (const s of this.samples) for (const [g, runs] of s.byGpu) if (runs.has(run)) gpus.add(g);
    return [...gpus].sort((a, b) => a - b);
  }
}

const WORKER_MAIN = resolve(import.meta.dirname, 'leases-worker.ts');

/**
 * An aerie worker (createWorker, the lease activities included) polling only `taskQueue`,
 * in its own process group; lease workflows go to the pipeline's queue, served by the test's
 * in-process worker. Returns its pgid.
 */
export async function spawnQueueWorker(
  address: string,
  taskQueue: string,
  bundleCode: string,
  dir: string,
): Promise<number> {
  const codePath = join(dir, `workflow-bundle-${taskQueue}.js`);
  await writeFile(codePath, bundleCode);
  return spawnWorkerProcess(
    ['--import', 'tsx', WORKER_MAIN, address, taskQueue, codePath],
    join(dir, `${taskQueue}.log`),
  );
}
