/**
 * Extraction-mode dumps (incident 6): the patched server writes one file per /generate
 * request that carries an `rid` when SGLANG_HS_DUMP_DIR is set. The simulator writes the
 * exact size the real dump has — prompt_tokens x 3 aux layers x hidden_size x 2 bytes (bf16)
 * — as a sparse file, under a temporary name first and renamed when complete, so a reader
 * never sees a half-written `<rid>.hs`.
 */
import fs from 'node:fs/promises';
import path from 'node:path';

export const AUX_LAYERS = 3;
export const BYTES_PER_VALUE = 2;

export function dumpBytes(promptTokens: number, hiddenSize: number): number {
  return promptTokens * AUX_LAYERS * hiddenSize * BYTES_PER_VALUE;
}

export function dumpFileName(rid: string): string {
  return `${rid}.hs`;
}

/** Why an rid cannot name a dump file, or null when it can. */
export function ridProblem(rid: string): string | null {
  if (rid === '' || rid === '.' || rid === '..' || rid.includes('/') || rid.includes('\0')) {
    return `rid ${JSON.stringify(rid)} cannot name a hidden-state dump file under SGLANG_HS_DUMP_DIR`;
  }
  return null;
}

export class HiddenStateDumper {
  constructor(readonly dir: string, private readonly hiddenSize: number) {}

  async prepare(): Promise<void> {
    await fs.mkdir(this.dir, { recursive: true });
  }

  async write(rid: string, promptTokens: number): Promise<void> {
    const final = path.join(this.dir, dumpFileName(rid));
    const tmp = path.join(this.dir, `.${rid}.hs.${process.pid}.tmp`);
    const fh = await fs.open(tmp, 'w');
    try {
      await fh.truncate(dumpBytes(promptTokens, this.hiddenSize));
    } finally {
      await fh.close();
    }
    await fs.rename(tmp, final);
  }
}
