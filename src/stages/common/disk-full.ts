/**
 * A write refused for lack of space, told apart from other write failures so the stage can
 * say which disk is full and how much is left, and the activity can retry it (space is the
 * one cause an operator, or another job finishing, fixes while the run waits); and a stage
 * refused before it starts because the destination cannot hold what it will write.
 */
import type { Host } from '../../hosts/host.js';

/**
 * Local writes fail with code ENOSPC (EDQUOT for a quota); over SSH the code is lost and the
 * remote tool's stderr carries the text instead, so both are recognised.
 */
export function isNoSpace(err: unknown): boolean {
  const e = err as { code?: string; message?: string; cause?: unknown } | undefined;
  if (!e) return false;
  if (e.code === 'ENOSPC' || e.code === 'EDQUOT') return true;
  if (/ENOSPC|EDQUOT|no space left on device|disk quota exceeded/i.test(e.message ?? '')) return true;
  return e.cause !== undefined && e.cause !== err && isNoSpace(e.cause);
}

export class DiskFullError extends Error {
  constructor(
    readonly host: string,
    readonly path: string,
    /** The size of the refused write, when one write was refused (null for a whole step). */
    readonly wantedBytes: number | null,
    /** What statfs said right after the failure; null when even that could not be asked. */
    readonly freeBytes: number | null,
  ) {
    const free =
      freeBytes === null ? 'free space unknown' : `${formatBytes(freeBytes)} (${freeBytes} bytes) free there`;
    super(
      `no space left on device (ENOSPC) writing ${path} on ${host}${wantedBytes === null ? '' : ` (${wantedBytes} bytes)`}: ${free}. ` +
        `Fix: free space on that disk, or point hosts.${host}.workdir at a larger one; ` +
        `the stage retries with backoff and resumes from the shards already written, nothing partial is counted`,
    );
    this.name = 'DiskFullError';
  }
}

/**
 * The error to throw for a failed write of `bytes` to `path`: a DiskFullError when space ran
 * out. SFTP (protocol 3) has no ENOSPC status and reports a refused write as a bare
 * "Failure", so a failure with less room left than the write needed counts as a full disk too.
 */
export async function writeFailure(host: Host, path: string, bytes: number | null, err: unknown): Promise<unknown> {
  if (err instanceof DiskFullError) return err;
  const dir = path.slice(0, Math.max(1, path.lastIndexOf('/')));
  const free = await host.freeBytes(dir).catch(() => null);
  const noRoom = free !== null && free < Math.max(bytes ?? 0, 1);
  if (!isNoSpace(err) && !noRoom) return err;
  return new DiskFullError(host.name, path, bytes, free);
}

/** The destination cannot hold the extraction: retrying cannot help. */
export class InsufficientSpaceError extends Error {
  constructor(
    readonly neededBytes: number,
    readonly freeBytes: number,
    message: string,
  ) {
    super(message);
    this.name = 'InsufficientSpaceError';
  }
}

export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${u === 0 ? v : v.toFixed(1)} ${units[u]}`;
}
