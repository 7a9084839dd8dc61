/**
 * `data.pkl` as torch.save writes it for a dict of CPU tensors: Python's protocol-2 pickle of
 * `{key: _rebuild_tensor_v2(storage, …)}` with each storage a persistent id. torch-zip.ts puts
 * it in the archive beside the storages' bytes (its header has the layout, read off a file
 * torch 2.13.0 wrote).
 */

export type DType = 'int64' | 'int32' | 'bool' | 'float32' | 'float16' | 'bfloat16';

/** torch's legacy storage class for each dtype (what the persistent id names) and its size. */
const STORAGE: Record<DType, [string, number]> = {
  int64: ['LongStorage', 8],
  int32: ['IntStorage', 4],
  bool: ['BoolStorage', 1],
  float32: ['FloatStorage', 4],
  float16: ['HalfStorage', 2],
  bfloat16: ['BFloat16Storage', 2],
};

export interface TensorSpec {
  key: string;
  dtype: DType;
  shape: number[];
  /** The storage's little-endian bytes; zeros when absent. */
  data?: Buffer;
}

/**
 * Python's pickler at protocol 2, for the few object kinds torch.save emits here. Python
 * memoizes by object identity; torch reuses the same 'storage' and 'cpu' strings and each
 * global, so memoizing strings and globals by value gives the same opcodes byte for byte.
 */
class Pickler {
  private parts: Buffer[] = [Buffer.from([0x80, 2])];
  private memo = new Map<string, number>();
  private next = 0;

  private op(...bytes: number[]): void {
    this.parts.push(Buffer.from(bytes));
  }
  private raw(b: Buffer): void {
    this.parts.push(b);
  }
  private put(): void {
    const n = this.next++;
    if (n < 256)
      this.op(0x71, n); // BINPUT
    else {
      const b = Buffer.alloc(5);
      b[0] = 0x72; // LONG_BINPUT
      b.writeUInt32LE(n, 1);
      this.raw(b);
    }
  }
  private get(n: number): void {
    if (n < 256)
      this.op(0x68, n); // BINGET
    else {
      const b = Buffer.alloc(5);
      b[0] = 0x6a; // LONG_BINGET
      b.writeUInt32LE(n, 1);
      this.raw(b);
    }
  }
  private memoized(key: string, write: () => void): void {
    const hit = this.memo.get(key);
    if (hit !== undefined) return this.get(hit);
    write();
    this.memo.set(key, this.next);
    this.put();
  }
  mark(): void {
    this.op(0x28);
  }
  str(s: string): void {
    this.memoized(`s:${s}`, () => {
      const body = Buffer.from(s, 'utf8');
      const head = Buffer.alloc(5);
      head[0] = 0x58; // BINUNICODE
      head.writeUInt32LE(body.length, 1);
      this.raw(Buffer.concat([head, body]));
    });
  }
  global(module: string, name: string): void {
    this.memoized(`g:${module}\n${name}`, () => this.raw(Buffer.from(`c${module}\n${name}\n`, 'latin1')));
  }
  int(n: number): void {
    if (!Number.isSafeInteger(n)) throw new Error(`pickle: ${n} is not an integer`);
    if (n >= 0 && n < 256) return this.op(0x4b, n); // BININT1
    if (n >= 0 && n < 65536) return this.op(0x4d, n & 0xff, n >> 8); // BININT2
    if (n >= -(2 ** 31) && n < 2 ** 31) {
      const b = Buffer.alloc(5);
      b[0] = 0x4a; // BININT
      b.writeInt32LE(n, 1);
      return this.raw(b);
    }
    // LONG1: the shortest little-endian two's complement, as Python's encode_long.
    const bytes: number[] = [];
    let v = BigInt(n);
    for (;;) {
      const byte = Number(v & 0xffn);
      bytes.push(byte);
      v >>= 8n;
      if ((v === 0n && !(byte & 0x80)) || (v === -1n && byte & 0x80)) break;
    }
    this.op(0x8a, bytes.length, ...bytes);
  }
  /** Tuples of one to three items close with TUPLE1-3, longer ones with MARK … TUPLE. */
  tuple(items: (() => void)[]): void {
    if (items.length === 0) return this.op(0x29); // EMPTY_TUPLE, never memoized
    if (items.length > 3) this.mark();
    for (const it of items) it();
    this.op(items.length > 3 ? 0x74 : 0x84 + items.length);
    this.put();
  }
  /** `tuple` and REDUCE: callable(*args). */
  reduce(callable: () => void, args: (() => void)[]): void {
    callable();
    this.tuple(args);
    this.op(0x52);
    this.put();
  }
  emptyDict(): void {
    this.op(0x7d);
    this.put();
  }
  persistentId(pid: () => void): void {
    pid();
    this.op(0x51); // BINPERSID
  }
  falsy(): void {
    this.op(0x89); // NEWFALSE
  }
  raw1(code: number): void {
    this.op(code);
  }
  done(): Buffer {
    this.op(0x2e); // STOP
    return Buffer.concat(this.parts);
  }
}

/**
 * `data.pkl` for a dict of tensors and the storages it refers to, keyed '0', '1', … in the
 * order they are met, as torch.save's persistent_id numbers them. Each tensor pickles as
 * `_rebuild_tensor_v2(storage, 0, size, stride, False, OrderedDict())`.
 */
export function pickleTensorDict(tensors: TensorSpec[]): { pickle: Buffer; storages: (Buffer | number)[] } {
  const p = new Pickler();
  const storages: (Buffer | number)[] = [];
  p.emptyDict();
  if (tensors.length > 1) p.mark();
  for (const t of tensors) {
    const [cls, item] = STORAGE[t.dtype];
    const numel = t.shape.reduce((a, b) => a * b, 1);
    if (t.data && t.data.length !== numel * item)
      throw new Error(`${t.key}: ${t.data.length} bytes for ${numel} × ${item}`);
    const stride = t.shape.map((_, i) => t.shape.slice(i + 1).reduce((a, b) => a * b, 1));
    const key = String(storages.length);
    storages.push(t.data ?? numel * item);
    p.str(t.key);
    p.reduce(
      () => p.global('torch._utils', '_rebuild_tensor_v2'),
      [
        () =>
          p.persistentId(() =>
            p.tuple([
              () => p.str('storage'),
              () => p.global('torch', cls),
              () => p.str(key),
              () => p.str('cpu'),
              () => p.int(numel),
            ]),
          ),
        () => p.int(0),
        () => p.tuple(t.shape.map((d) => () => p.int(d))),
        () => p.tuple(stride.map((d) => () => p.int(d))),
        () => p.falsy(),
        () => p.reduce(() => p.global('collections', 'OrderedDict'), []),
      ],
    );
    if (tensors.length === 1) p.raw1(0x73); // SETITEM
  }
  if (tensors.length > 1) p.raw1(0x75); // SETITEMS
  return { pickle: p.done(), storages };
}
