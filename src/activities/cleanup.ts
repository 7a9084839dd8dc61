/**
 * After a cancel: whatever the run still has running on its target host, stopped by its
 * launch records. The stage activities stop their own jobs when they hear the cancel; this is
 * for a job whose activity never heard it (its worker was gone: the researcher pressed Ctrl-C
 * on `aerie run`, then ran `aerie cancel`), which would otherwise train on until someone looks.
 */
import { stopRunLaunches } from '../hosts/index.js';
import { keepHeartbeating, type ActivityDeps, type RunRef } from './context.js';

export function cleanupActivities({ hosts }: ActivityDeps) {
  return {
    async stopRunLeftovers({ runId, config }: RunRef): Promise<{ stopped: string[] }> {
      const beat = keepHeartbeating(() => ({ stopping: runId }));
      try {
        return { stopped: await stopRunLaunches(hosts.get(config), [runId]) };
      } finally {
        beat();
      }
    },
  };
}
