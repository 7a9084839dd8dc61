/**
 * Is a trained drafter servable by SGLang's EAGLE3 worker? SGLang loads whatever weight names
 * it recognises and silently ignores the rest, so a drafter missing `d2t` or `fc` starts fine
 * and accepts about one token; the only place to catch that is here, from config.json and the
 * safetensors header (the first few KiB of the file, no tensor data needed).
 */

/** Raised when the buffer holds less than the header; `needBytes` says how much to read. */
export class SafetensorsTruncatedError extends Error {
  constructor(
    readonly needBytes: number,
    got: number,
  ) {
    super(`safetensors header not complete: need the first ${needBytes} bytes of the file, got ${got}`);
  }
}

const MAX_HEADER = 100_000_000; // the safetensors format's own limit

const DTYPE_BYTES: Record<string, number> = {
  BOOL: 1,
  U8: 1,
  I8: 1,
  F8_E4M3: 1,
  F8_E5M2: 1,
  U16: 2,
  I16: 2,
  F16: 2,
  BF16: 2,
  U32: 4,
  I32: 4,
  F32: 4,
  U64: 8,
  I64: 8,
  F64: 8,
};

/** The header length from the first 8 bytes (little-endian u64), so a caller can read exactly 8 + n. */
export function safetensorsHeaderLength(first8: Buffer): number {
  if (first8.length < 8)
    throw new Error(`not a safetensors file: need 8 bytes for the header length, got ${first8.length}`);
  const n = first8.readBigUInt64LE(0);
  if (n < 2n || n > BigInt(MAX_HEADER)) {
    throw new Error(`not a safetensors file: header length ${n} is outside 2..${MAX_HEADER} bytes`);
  }
  return Number(n);
}

export function parseSafetensorsHeader(firstBytes: Buffer): { headerLength: number; header: Record<string, unknown> } {
  const headerLength = safetensorsHeaderLength(firstBytes);
  if (firstBytes.length < 8 + headerLength) throw new SafetensorsTruncatedError(8 + headerLength, firstBytes.length);
  const raw = firstBytes.subarray(8, 8 + headerLength).toString('utf8');
  let header: unknown;
  try {
    header = JSON.parse(raw);
  } catch (e) {
    throw new Error(`not a safetensors file: the ${headerLength}-byte header is not JSON (${(e as Error).message})`);
  }
  if (typeof header !== 'object' || header === null || Array.isArray(header)) {
    throw new Error('not a safetensors file: the header is not a JSON object');
  }
  for (const [name, info] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    const problem = tensorEntryProblem(info);
    if (problem) throw new Error(`malformed safetensors header: tensor "${name}" ${problem}`);
  }
  return { headerLength, header: header as Record<string, unknown> };
}

interface TensorInfo {
  dtype: string;
  shape: number[];
  data_offsets: [number, number];
}

function tensorEntryProblem(info: unknown): string | undefined {
  if (typeof info !== 'object' || info === null) return 'is not an object';
  const t = info as Partial<TensorInfo>;
  if (typeof t.dtype !== 'string') return 'has no dtype';
  if (!Array.isArray(t.shape) || !t.shape.every((d) => Number.isInteger(d) && d >= 0)) return 'has no valid shape';
  const o = t.data_offsets;
  if (!Array.isArray(o) || o.length !== 2 || !o.every((x) => Number.isInteger(x) && x >= 0) || o[1] < o[0]) {
    return 'has no valid data_offsets [begin, end]';
  }
  const size = DTYPE_BYTES[t.dtype];
  const numel = t.shape.reduce((a, b) => a * b, 1);
  if (size !== undefined && o[1] - o[0] !== numel * size) {
    return `spans ${o[1] - o[0]} bytes but ${t.dtype}${JSON.stringify(t.shape)} needs ${numel * size}`;
  }
  return undefined;
}

const posInt = (v: unknown): v is number => Number.isInteger(v) && (v as number) > 0;
const same = (a: number[], b: number[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

// Modules under LlamaForCausalLMEagle3.model; lm_head sits beside it, at the top level.
const MODEL_MODULES = ['fc.', 'norm.', 'layers.', 'embed_tokens.', 'fc_norm.'];

/**
 * The parameter SGLang 0.5.23's EAGLE3 loader puts a tensor into, named without the
 * `model.` prefix (`lm_head.weight`, `fc.weight`, `layers.0.…`, `d2t`), or null when the
 * loader drops it without a word. Its rules (sglang==0.5.23:sglang/srt/models/llama_eagle3.py):
 * legacy names are rewritten first, `midlayer` → `layers.0` and the aux norms (:338-348);
 * any name containing `d2t` is the vocab offset table, any containing `t2d` is skipped
 * (:350-356); every other name is used as is when it is a parameter, else with `model.`
 * prepended (:362,372), so `x` and `model.x` both load for modules under `model`, while
 * `lm_head.weight` loads only bare (the head is not under `model`, :309) and a
 * `draft_model.` prefix loads nowhere.
 */
export function sglangEagle3ParamName(name: string): string | null {
  if (name.includes('d2t')) return 'd2t';
  if (name.includes('t2d')) return 't2d';
  let n = name;
  for (const [legacy, now] of [
    ['midlayer', 'layers.0'],
    ['aux_norm_low', 'fc_norm.0'],
    ['aux_norm_mid', 'fc_norm.1'],
    ['aux_norm_high', 'fc_norm.2'],
  ] as const) {
    if (n.includes(legacy)) n = n.split(legacy).join(now);
  }
  if (n.startsWith('lm_head.')) return n;
  const under = n.startsWith('model.') ? n.slice('model.'.length) : n;
  return MODEL_MODULES.some((m) => under.startsWith(m)) ? under : null;
}

const MISSING_CONSEQUENCE: Record<string, string> = {
  'fc.weight': 'the fusion of the three target hidden states would stay untrained',
  'lm_head.weight': 'the draft head would be random',
  d2t: 'draft token ids would be read as target ids, so nearly every proposal is wrong',
};

export function verifyDrafter(configJson: unknown, safetensorsHeader: unknown): string[] {
  const problems: string[] = [];
  if (typeof configJson !== 'object' || configJson === null || Array.isArray(configJson))
    return ['config.json is not a JSON object'];
  const cfg = configJson as Record<string, unknown>;

  const arch = cfg.architectures;
  if (!Array.isArray(arch) || !arch.includes('LlamaForCausalLMEagle3')) {
    problems.push(
      `config.json architectures is ${JSON.stringify(arch ?? null)}: SGLang's EAGLE3 drafter class is LlamaForCausalLMEagle3`,
    );
  }
  if (!posInt(cfg.draft_vocab_size))
    problems.push('config.json has no positive integer draft_vocab_size: the draft head and d2t cannot be sized');
  if (cfg.num_hidden_layers !== 1)
    problems.push(
      `config.json num_hidden_layers is ${JSON.stringify(cfg.num_hidden_layers ?? null)}: an EAGLE-3 drafter has exactly 1`,
    );
  if (!posInt(cfg.hidden_size)) problems.push('config.json has no positive integer hidden_size');
  if (!posInt(cfg.vocab_size)) problems.push('config.json has no positive integer vocab_size');

  const wrapped = safetensorsHeader as { header?: unknown; headerLength?: unknown } | null;
  const header =
    wrapped && typeof wrapped === 'object' && typeof wrapped.headerLength === 'number'
      ? wrapped.header
      : safetensorsHeader;
  if (typeof header !== 'object' || header === null || Array.isArray(header))
    return [...problems, 'model.safetensors header is not a JSON object'];
  // Keyed by the parameter SGLang loads each tensor into, so `model.fc.weight` counts as fc.
  const tensors = new Map<string, TensorInfo>();
  const dropped: string[] = [];
  for (const [name, info] of Object.entries(header as Record<string, unknown>)) {
    if (name === '__metadata__' || tensorEntryProblem(info)) continue;
    const param = sglangEagle3ParamName(name);
    if (param === null) dropped.push(name);
    else if (!tensors.has(param)) tensors.set(param, info as TensorInfo);
  }

  for (const name of ['fc.weight', 'lm_head.weight', 'd2t']) {
    if (tensors.has(name)) continue;
    const misplaced = dropped.find((n) => n.endsWith(`.${name}`));
    problems.push(
      misplaced
        ? `model.safetensors names it "${misplaced}": SGLang loads only ${name === 'lm_head.weight' ? '"lm_head.weight" (the head is not under model.)' : `"${name}" or "model.${name}"`} and would skip it silently, so ${MISSING_CONSEQUENCE[name]} (accept length ≈ 1)`
        : `model.safetensors has no ${name}: SGLang ignores missing weights silently, so ${MISSING_CONSEQUENCE[name]} (accept length ≈ 1)`,
    );
  }
  if (![...tensors.keys()].some((n) => n.startsWith('layers.'))) {
    const prefixed = dropped.find((n) => n.includes('.midlayer.'));
    problems.push(
      prefixed
        ? `model.safetensors names its decoder layer "${prefixed.split('.midlayer.')[0]}.midlayer.*": SGLang expects "midlayer.*" or "model.midlayer.*" and would ignore it`
        : 'model.safetensors has no midlayer.* weights: the drafter has no decoder layer SGLang can load',
    );
  }

  const H = cfg.hidden_size;
  const Vd = cfg.draft_vocab_size;
  const V = cfg.vocab_size;
  const Ht = posInt(cfg.target_hidden_size) ? cfg.target_hidden_size : H;
  const d2t = tensors.get('d2t');
  if (d2t && posInt(Vd) && (d2t.dtype !== 'I64' || !same(d2t.shape, [Vd]))) {
    problems.push(`d2t is ${d2t.dtype}${JSON.stringify(d2t.shape)}: expected I64[${Vd}] (one offset per draft token)`);
  }
  const t2d = tensors.get('t2d');
  if (t2d && posInt(V) && (t2d.dtype !== 'BOOL' || !same(t2d.shape, [V]))) {
    problems.push(`t2d is ${t2d.dtype}${JSON.stringify(t2d.shape)}: expected BOOL[${V}] (one flag per target token)`);
  }
  const head = tensors.get('lm_head.weight');
  if (head && posInt(Vd) && posInt(H) && !same(head.shape, [Vd, H])) {
    problems.push(
      `lm_head.weight is ${JSON.stringify(head.shape)}: expected [draft_vocab_size, hidden_size] = [${Vd}, ${H}]`,
    );
  }
  const fc = tensors.get('fc.weight');
  if (fc && posInt(H) && posInt(Ht) && !same(fc.shape, [H, 3 * Ht])) {
    problems.push(
      `fc.weight is ${JSON.stringify(fc.shape)}: expected [${H}, ${3 * Ht}] (hidden_size × three target hidden states)`,
    );
  }
  return problems;
}
