/**
 * Fault injection (AERIE_SIM_FAULT), with one-shot faults for retry tests: when
 * AERIE_SIM_FAULT_ONCE names a path, the fault fires only if that path does not exist,
 * and firing creates it — so the relaunch after a failure comes up clean.
 */
import fs from 'node:fs';
import type { Fault, SimEnv } from './settings.js';

export class FaultGate {
  private decided = new Map<Fault, boolean>();

  constructor(private readonly env: Pick<SimEnv, 'fault' | 'faultOnce'>) {}

  /** true exactly once per process, at the point where `fault` would strike, if it is armed. */
  fire(fault: Fault): boolean {
    if (this.env.fault !== fault) return false;
    if (this.decided.has(fault)) return false;
    let armed = true;
    if (this.env.faultOnce) {
      armed = !fs.existsSync(this.env.faultOnce);
      if (armed)
        fs.writeFileSync(this.env.faultOnce, `${fault} fired at ${new Date().toISOString()} in pid ${process.pid}\n`);
    }
    this.decided.set(fault, armed);
    return armed;
  }
}
