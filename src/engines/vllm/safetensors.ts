/**
 * Tensor names from a safetensors file's header, read on the host without loading the
 * weights: the header is an 8-byte little-endian length and a JSON object whose keys are the
 * tensor names (plus __metadata__). A drafter's file may be gigabytes; only its head is read.
 */

/** A Python one-liner (standard library only) that prints the JSON list of tensor names in the files given. */
export const safetensorsNamesScript = [
  'import json, struct, sys',
  'names = []',
  'for p in sys.argv[1:]:',
  '    with open(p, "rb") as f:',
  '        n = struct.unpack("<Q", f.read(8))[0]',
  '        names += [k for k in json.loads(f.read(n)) if k != "__metadata__"]',
  'print(json.dumps(names))',
].join('\n');

/** The tensor names of a whole safetensors file's bytes (for tests and local reads). */
export function parseSafetensorsHeader(bytes: Buffer): string[] {
  if (bytes.length < 8) throw new Error('not a safetensors file: shorter than its 8-byte header length');
  const n = Number(bytes.readBigUInt64LE(0));
  if (n <= 0 || 8 + n > bytes.length) throw new Error(`not a safetensors file: header length ${n} past the end`);
  const header = JSON.parse(bytes.subarray(8, 8 + n).toString('utf8')) as Record<string, unknown>;
  return Object.keys(header).filter((k) => k !== '__metadata__');
}
