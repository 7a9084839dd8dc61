/** Telling a full disk from other write failures, including SFTP's bare "Failure". */
import { describe, expect, it } from 'vitest';
import type { Host } from '../../src/hosts/host.js';
import { DiskFullError, isNoSpace, writeFailure } from '../../src/stages/common/disk-full.js';

const hostWithFree = (free: number | Error): Host =>
  ({ name: 'gpu8', freeBytes: async () => (free instanceof Error ? Promise.reject(free) : free) }) as unknown as Host;

describe('writeFailure', () => {
  it("recognises ENOSPC by code and by the remote tool's words", async () => {
    expect(isNoSpace(Object.assign(new Error('write'), { code: 'ENOSPC' }))).toBe(true);
    expect(isNoSpace(new Error("dd: error writing '/d/x': No space left on device"))).toBe(true);
    expect(isNoSpace(new Error('Permission denied'))).toBe(false);
    const e = await writeFailure(
      hostWithFree(12),
      '/data/runs/r/data/shards/ok-000003.jsonl',
      4096,
      Object.assign(new Error('x'), { code: 'ENOSPC' }),
    );
    expect(e).toBeInstanceOf(DiskFullError);
    expect((e as Error).message).toMatch(
      /^no space left on device \(ENOSPC\) writing \/data\/runs\/r\/data\/shards\/ok-000003\.jsonl on gpu8 \(4096 bytes\): 12 B \(12 bytes\) free there/,
    );
  });

  it('takes SFTP\'s bare "Failure" for a full disk only when less room is left than the write needed', async () => {
    const sftp = new Error('Failure');
    expect(await writeFailure(hostWithFree(100), '/d/ok-1.jsonl', 4096, sftp)).toBeInstanceOf(DiskFullError);
    expect(await writeFailure(hostWithFree(0), '/d/ok-1.jsonl', null, sftp)).toBeInstanceOf(DiskFullError);
    expect(await writeFailure(hostWithFree(10 * 2 ** 30), '/d/ok-1.jsonl', 4096, sftp)).toBe(sftp);
    // Free space that cannot be read leaves the error as it was.
    expect(await writeFailure(hostWithFree(new Error('gone')), '/d/ok-1.jsonl', 4096, sftp)).toBe(sftp);
  });
});
