/**
 * stopServer: the launch's whole process group goes, and the stop waits (up to two minutes)
 * until the GPUs its processes held are free, so the next launch does not find them taken.
 * Only what aerie recorded is signalled (ARCHITECTURE.md, process protocol); foreign GPU users
 * are counted for the record, never stopped (incident 4).
 */
import { sleep } from '../stages/common/index.js';
import { keepHeartbeating, type ActivityDeps } from './context.js';
import type { ServerStep } from './server-types.js';
import { pgidOf } from './server-watch.js';

export function serverStopActivities({ hosts }: ActivityDeps) {
  return {
    async stopServer(
      input: ServerStep,
    ): Promise<{ signals: string[]; groupEmpty: boolean; gpuReleased: boolean | null; foreignGpuProcesses: number }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const stopBeat = keepHeartbeating(() => ({ stopping: launch.launchId }));
      try {
        // GPU processes of our group, noted before the kill so their release can be awaited after it.
        const before = await host.gpuInventory();
        const ourGpuPids: number[] = [];
        for (const p of before.available ? before.processes : []) {
          if ((await pgidOf(host, p.pid)) === launch.pgid) ourGpuPids.push(p.pid);
        }
        const result = await host.killGroup(launch.record, { graceMs: 15_000 });
        let gpuReleased: boolean | null = null;
        let after = before;
        if (ourGpuPids.length > 0) {
          const deadline = Date.now() + 120_000;
          for (;;) {
            after = await host.gpuInventory();
            gpuReleased = !after.processes.some((p) => ourGpuPids.includes(p.pid));
            if (gpuReleased || Date.now() > deadline) break;
            await sleep(1000);
          }
        }
        return { ...result, gpuReleased, foreignGpuProcesses: after.processes.filter((p) => !p.ours).length };
      } finally {
        stopBeat();
      }
    },
  };
}
