/**
 * Sizes for planning hidden-state extraction: what a token costs on disk and in the dump
 * folder, and how to print it.
 */

/**
 * Bytes per token: aux 3H + final H, bf16 (8·H). It is the capture's dump in RAM
 * (py/aerie_hs/safetensors_dump.py) and, within 16 bytes of ids and mask, SpecForge's file.
 */
export function estimatedBytesPerToken(hiddenSize: number): number {
  return 8 * hiddenSize;
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
