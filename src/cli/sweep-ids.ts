/** Where a sweep lives: its parent's workflow id and its local folder. Light, for `aerie status`. */
import { join } from 'node:path';
import { stateDir } from '../temporal/dev-server.js';

/** The parent's workflow id; its children are the runs, by their run ids. */
export function sweepWorkflowId(sweepId: string): string {
  return `aerie-sweep-${sweepId}`;
}

/** sweep.json (what was started), sweep.md and sweep.html (the report), the in-process worker's log. */
export function sweepFolder(sweepId: string): string {
  return join(stateDir(), 'sweeps', sweepId);
}
