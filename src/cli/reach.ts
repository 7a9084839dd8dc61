/**
 * Failures the CLI explains in its own words: printed as one reason, without a stack, as a
 * user should meet them. An unexpected error still shows its stack (main.ts): that is a bug.
 */
import type { Client } from '@temporalio/client';
import { connectClient, type TemporalTarget } from '../temporal/connect.js';

export class CliError extends Error {
  override name = 'CliError';
}

/** The client, or what to do when Temporal does not answer (grpc's own words kept as the cause). */
export async function reachTemporal(target: TemporalTarget): Promise<Client> {
  try {
    return await connectClient(target);
  } catch (err) {
    const why = (err as Error).message;
    const fix = target.devServer
      ? `aerie's dev server (pid ${target.devServer.pid}) did not answer; its log: ${target.devServer.logPath}. Fix: aerie dev-server --stop, then run again`
      : "it came from TEMPORAL_ADDRESS or a temporal envconfig profile. Fix: start that server, or unset TEMPORAL_ADDRESS to use aerie's own dev server";
    throw new CliError(`cannot reach Temporal at ${target.address} (${why}): ${fix}`, { cause: err });
  }
}
