/**
 * The engine core dying at run time in `aerie-sim vllm`: a drafter whose aux layers do not fit
 * the target's, or an injected crash, at the first real decode; vLLM's tracebacks, and every open
 * request answered 500 (generate.ts). server.ts decides what the process does next.
 */
import type { VllmServer } from './context.js';
import { engineDeath } from './tracebacks.js';

/** The engine core dies: tracebacks, every open request answered 500 (they await deadPromise). */
export function die(srv: VllmServer, error: string): void {
  if (srv.status === 'dead' || srv.status === 'shutting-down') return;
  srv.status = 'dead';
  srv.engine.halt();
  engineDeath(srv.log, error, srv.a.model, srv.lastPrompt);
  srv.deadResolve();
}

/** The engine's beforeRealDecode: true when the engine dies instead of decoding. */
export function dieBeforeDecode(srv: VllmServer): boolean {
  const { faults, plan, target } = srv;
  if (plan?.doomed) {
    const H = target.hiddenSize;
    const draftH = plan.drafter.hiddenSize;
    die(
      srv,
      `RuntimeError: mat1 and mat2 shapes cannot be multiplied (${srv.lastPrompt}x${plan.doomed.collected * H} and ${plan.doomed.expected * H}x${draftH})`,
    );
    return true;
  }
  if (faults.fire('crash-first-decode')) {
    die(srv, 'RuntimeError: CUDA error: an illegal memory access was encountered');
    return true;
  }
  return false;
}
