/**
 * Sizes for planning hidden-state extraction: what a token costs on disk and in the dump
 * folder.
 */

/**
 * Bytes per token: aux 3H + final H, bf16 (8·H). It is the capture's dump in RAM
 * (py/aerie_hs/safetensors_dump.py) and, within 16 bytes of ids and mask, SpecForge's file.
 */
export function estimatedBytesPerToken(hiddenSize: number): number {
  return 8 * hiddenSize;
}
