/**
 * The fault rig: a real Temporal dev server on a persistent SQLite file (headless), real
 * `aerie worker` processes, and the means to kill either on purpose — all test/support's
 * useTemporalSuite, which stops every process it started by its own process group.
 */
import { useTemporalSuite, type TemporalSuite } from '../support/temporal.js';

export class FaultRig {
  constructor(private readonly suite: TemporalSuite) {}

  /** The folder the cases' host workdirs and the worker logs live in. */
  get dir(): string {
    return this.suite.work;
  }

  /** The client of the dev server now running (a new one after crashAndRestartTemporal). */
  get client() {
    return this.suite.t.client;
  }

  /** A real `aerie worker` process in its own process group. */
  startWorker(name: string): Promise<number> {
    return this.suite.startWorkerProcess(name);
  }

  killWorker(name: string): void {
    this.suite.killWorkerProcess(name);
  }

  /** SIGKILL the dev server (its recorded group), then start it again on the same port and database. */
  crashAndRestartTemporal(): Promise<void> {
    return this.suite.t.crashAndRestart();
  }
}

/** The file's rig, with its own beforeAll/afterAll (useTemporalSuite's): no workflow bundle, no web UI. */
export function useFaultRig(): FaultRig {
  return new FaultRig(useTemporalSuite('aerie-faults-', { headless: true, bundle: false }));
}
