/**
 * aerie_hs.ckpt (py/aerie_hs/ckpt.py, torch_save.py, safetensors_dump.py) with the machine's
 * python3 and no torch: the capture's dumps become SpecForge's rows_<g>-<g+G>/data_<i>.ckpt.
 * Judges that are not aerie's: the bytes real torch.save wrote (test/fixtures/real/torch-2.13.0),
 * and Python's own zipfile and pickle machinery reading the converter's files.
 */
import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { VERIFY_SCRIPT } from '../../src/stages/extract/offline-verify.js';
import { python, pythonOutAsync } from '../support/python.js';
import { useWorkdir } from '../support/workdir.js';

const ROOT = resolve(import.meta.dirname, '../..');
const FIXTURE = join(ROOT, 'test/fixtures/real/torch-2.13.0/data_0.ckpt');
const tmp = useWorkdir('aerie-ckpt-');
let dir: string;

function py(code: string, ...args: string[]): Promise<string> {
  return pythonOutAsync(code, args);
}

/** Runs the CLI; resolves with its exit code and stdout lines (a failing exit is an answer here). */
async function convert(...args: string[]): Promise<{ code: number; lines: string[]; stderr?: string }> {
  const r = await python(['-m', 'aerie_hs.ckpt', 'convert', ...args]);
  const lines = r.stdout.trim().split('\n');
  return r.code === 0 ? { code: 0, lines } : { code: r.code ?? -1, lines, stderr: r.stderr };
}

/**
 * Dumps as aerie's capture writes them (capture.write_safetensors), one per spec:
 * [id, T, H, fault]. States are bf16 bit patterns unique to each sample and row.
 */
const MAKE_DUMPS = String.raw`
import json, sys, struct
from aerie_hs.capture import write_safetensors, input_ids_sha256
out, specs = sys.argv[1], json.loads(sys.argv[2])
rows = []
for sid, t, h, fault in specs:
    ids = [(7 * k + len(sid) * 31 + sum(map(ord, sid))) % 50000 for k in range(t)]
    mask = [0] * (t // 2) + [1] * (t - t // 2)
    rows.append({"id": sid, "input_ids": ids, "loss_mask": mask})
    n = t - 1 if fault == "short" else t + 2 if fault == "long" else t
    seed = sum(map(ord, sid))
    aux = struct.pack("<%dH" % (n * 3 * h), *[(seed * 131 + k) & 0x7f7f for k in range(n * 3 * h)])
    hs = struct.pack("<%dH" % (n * h), *[(seed * 17 + 3 * k) & 0x7f7f for k in range(n * h)])
    tensors = {"aux_hidden_state": ("BF16", [n, 3 * h], aux)}
    if fault != "nofinal":
        tensors["hidden_state"] = ("BF16", [n, h], hs)
    meta = {"format": "aerie-hs/1", "rid": sid, "tokens": str(n), "aux_layers": "[1, 5, 9]",
            "tp_rank": "1" if fault == "rank1" else "0",
            "input_ids_sha256": input_ids_sha256([i + 1 for i in ids] if fault == "sha" else ids)}
    if fault != "nodump":
        write_safetensors(out + "/dumps/" + sid + ".safetensors", tensors, meta)
with open(out + "/ids.jsonl", "a") as f:
    for r in rows:
        f.write(json.dumps(r) + "\n")
`;

/** Python's zipfile and pickle (not aerie's code) describe a file: entries, then the unpickled dict. */
const DESCRIBE = String.raw`
import json, sys, zipfile, pickle, io, collections, struct
def describe(p):
    z = zipfile.ZipFile(p)
    raw = open(p, "rb").read()
    def local(i):  # the local header's own name and extra lengths (zipfile reports the central one's)
        n, m = struct.unpack("<HH", raw[i.header_offset + 26:i.header_offset + 30])
        extra = raw[i.header_offset + 30 + n:i.header_offset + 30 + n + m]
        return [len(extra), extra[:2].decode(), (i.header_offset + 30 + n + m) % 64]
    entries = [[i.filename.split("/", 1)[1], i.header_offset, i.compress_type, i.flag_bits, i.file_size] + local(i) for i in z.infolist()]
    arch = z.infolist()[0].filename.split("/")[0]
    data = z.read(arch + "/data.pkl")
    ops = [op.name for op, _, _ in __import__("pickletools").genops(data)]
    def rebuild(*a):
        return {"storage": a[0]["storage"], "offset": a[1], "size": list(a[2]), "stride": list(a[3]), "grad": a[4]}
    class V(pickle.Unpickler):
        def find_class(self, mod, name):
            if (mod, name) == ("torch._utils", "_rebuild_tensor_v2"):
                return rebuild
            if (mod, name) == ("collections", "OrderedDict"):
                return collections.OrderedDict
            return mod + "." + name
        def persistent_load(self, pid):
            return {"storage": list(pid)}
    obj = V(io.BytesIO(data)).load()
    store = {k: list(z.read(arch + "/data/" + v["storage"][2])[:16]) for k, v in obj.items()}
    return {"archive": arch, "entries": entries, "keys": list(obj), "tensors": obj, "ops": ops, "head": store}
print(json.dumps([describe(p) for p in sys.argv[1:]]))
`;

beforeAll(() => {
  dir = tmp.path;
});

async function fresh(name: string, specs: [string, number, number, string][]): Promise<string> {
  const d = join(dir, name);
  await mkdir(join(d, 'dumps'), { recursive: true });
  await py(MAKE_DUMPS, d, JSON.stringify(specs));
  return d;
}

async function filesUnder(d: string): Promise<string[]> {
  return (await readdir(d, { recursive: true })).map(String).sort();
}

describe('the file torch.save writes', () => {
  it("is the real torch 2.13 fixture's bytes, serialization id and CRCs included, for its tensors", async () => {
    const d = join(dir, 'fixture');
    await mkdir(join(d, 'dumps'), { recursive: true });
    await py(
      String.raw`
import json, sys, zipfile
from aerie_hs.capture import write_safetensors, input_ids_sha256
z = zipfile.ZipFile(sys.argv[1]); d = sys.argv[2]
ids = list(range(100, 116)); mask = [0] * 6 + [1] * 10
write_safetensors(d + "/dumps/s0.safetensors", {"aux_hidden_state": ("BF16", [16, 24], z.read("data_0/data/2")),
    "hidden_state": ("BF16", [16, 8], z.read("data_0/data/3"))},
    {"format": "aerie-hs/1", "rid": "s0", "tokens": "16", "aux_layers": "[1, 2, 3]", "tp_rank": "0", "input_ids_sha256": input_ids_sha256(ids)})
open(d + "/ids.jsonl", "w").write(json.dumps({"id": "s0", "input_ids": ids, "loss_mask": mask}) + "\n")
`,
      FIXTURE,
      d,
    );
    const r = await convert(
      '--dumps',
      join(d, 'dumps'),
      '--ids',
      join(d, 'ids.jsonl'),
      '--out',
      join(d, 'out'),
      '--file-group-size',
      '2000',
    );
    const want = await readFile(FIXTURE);
    expect(r).toEqual({
      code: 0,
      lines: [`OK 0 s0 16 ${want.length}`, 'END written=1 skipped=0 missing=0 rejected=0 failed=0'],
    });
    const mine = await readFile(join(d, 'out/rows_0-2000/data_0.ckpt'));
    expect(mine.equals(want)).toBe(true);
  });

  it("has torch's layout entry by entry and the same pickle program at other shapes, as Python's zipfile and pickle read them", async () => {
    const d = await fresh('shapes', [
      ['a', 300, 64, ''],
      ['b', 1, 64, ''],
    ]);
    const r = await convert(
      '--dumps',
      join(d, 'dumps'),
      '--ids',
      join(d, 'ids.jsonl'),
      '--out',
      join(d, 'out'),
      '--file-group-size',
      '10',
    );
    expect(r.code).toBe(0);
    const [fx, a, b] = JSON.parse(
      await py(DESCRIBE, FIXTURE, join(d, 'out/rows_0-10/data_0.ckpt'), join(d, 'out/rows_0-10/data_1.ckpt')),
    ) as {
      archive: string;
      entries: (string | number)[][];
      keys: string[];
      ops: string[];
      tensors: Record<string, { storage: unknown[]; offset: number; size: number[]; stride: number[]; grad: boolean }>;
      head: Record<string, number[]>;
    }[];
    expect([a.archive, b.archive]).toEqual(['data_0', 'data_1']);
    const shape = (e: (string | number)[][]) =>
      e.map(([name, , method, flags, , , tag, align]) => [name, method, flags, tag, align]);
    expect(fx.entries.every((e) => e[6] === 'FB' && e[7] === 0)).toBe(true);
    expect(shape(a.entries)).toEqual(shape(fx.entries));
    expect(shape(b.entries)).toEqual(shape(fx.entries));
    expect(a.entries.every((e) => e[7] === 0)).toBe(true); // every entry's data starts 64-aligned
    expect(a.keys).toEqual(['input_ids', 'loss_mask', 'aux_hidden_state', 'hidden_state']);
    expect(a.keys).toEqual(fx.keys);
    // the pickle program: same opcodes but the integer widths the larger numbers need
    const norm = (ops: string[]) => ops.map((o) => (o.startsWith('BININT') ? 'INT' : o));
    expect(norm(a.ops)).toEqual(norm(fx.ops));
    expect(norm(b.ops)).toEqual(norm(fx.ops));
    expect(b.tensors.hidden_state.size).toEqual([1, 1, 64]);
    expect(a.tensors.aux_hidden_state).toEqual({
      storage: ['storage', 'torch.BFloat16Storage', '2', 'cpu', 300 * 192],
      offset: 0,
      size: [1, 300, 192],
      stride: [300 * 192, 192, 1],
      grad: false,
    });
    expect(a.tensors.hidden_state).toEqual({
      storage: ['storage', 'torch.BFloat16Storage', '3', 'cpu', 300 * 64],
      offset: 0,
      size: [1, 300, 64],
      stride: [300 * 64, 64, 1],
      grad: false,
    });
    expect(a.tensors.input_ids).toEqual({
      storage: ['storage', 'torch.LongStorage', '0', 'cpu', 300],
      offset: 0,
      size: [300],
      stride: [1],
      grad: false,
    });
    expect(fx.tensors.aux_hidden_state.storage[1]).toBe('torch.BFloat16Storage');
    const sizes = Object.fromEntries(a.entries.map((e) => [e[0], e[4]]));
    expect(sizes).toMatchObject({
      'data/0': 2400,
      'data/1': 2400,
      'data/2': 300 * 192 * 2,
      'data/3': 300 * 64 * 2,
      version: 2,
      '.data/serialization_id': 40,
    });
  });

  it("passes aerie's own stdlib verifier (extract-offline-verify) file by file", async () => {
    const d = await fresh('verify', [
      ['v0', 40, 32, ''],
      ['v1', 17, 32, ''],
      ['v2', 5, 32, ''],
    ]);
    expect(
      (
        await convert(
          '--dumps',
          join(d, 'dumps'),
          '--ids',
          join(d, 'ids.jsonl'),
          '--out',
          join(d, 'out'),
          '--file-group-size',
          '2',
        )
      ).code,
    ).toBe(0);
    const out = (await pythonOutAsync(VERIFY_SCRIPT, [join(d, 'out'), '32', 'off'], { pythonPath: false }))
      .trim()
      .split('\n');
    expect(out[0]).toBe('TORCH -');
    expect(out.slice(1).sort()).toEqual(
      [
        'END 3',
        'OK 0 ' + (await sizeOf(d, 'rows_0-2/data_0.ckpt')) + ' 40',
        'OK 1 ' + (await sizeOf(d, 'rows_0-2/data_1.ckpt')) + ' 17',
        'OK 2 ' + (await sizeOf(d, 'rows_2-4/data_2.ckpt')) + ' 5',
      ].sort(),
    );
  });
});

async function sizeOf(d: string, rel: string): Promise<number> {
  return (await readFile(join(d, 'out', rel))).length;
}

/** Each tensor of a converted file equals its dump's bytes and the sample's ids (read by Python's zipfile). */
const SAME_AS_DUMP = String.raw`
import json, sys, zipfile, struct
from aerie_hs.safetensors_dump import read_header
out, dumps = sys.argv[1], sys.argv[2]
rows = {r["id"]: r for r in map(json.loads, open(sys.argv[3]))}
res = {}
for line in open(out + "/index.jsonl"):
    e = json.loads(line); i = e["i"]; g = i // int(sys.argv[4]) * int(sys.argv[4])
    z = zipfile.ZipFile("%s/rows_%d-%d/data_%d.ckpt" % (out, g, g + int(sys.argv[4]), i))
    d = read_header(dumps + "/" + e["id"] + ".safetensors"); raw = open(d.path, "rb").read()
    r = rows[e["id"]]; a = "data_%d/" % i
    ok = (z.read(a + "data/0") == struct.pack("<%dq" % len(r["input_ids"]), *r["input_ids"])
          and z.read(a + "data/1") == struct.pack("<%dq" % len(r["loss_mask"]), *r["loss_mask"])
          and z.read(a + "data/2") == raw[d.tensors["aux_hidden_state"].begin:d.tensors["aux_hidden_state"].end]
          and z.read(a + "data/3") == raw[d.tensors["hidden_state"].begin:d.tensors["hidden_state"].end])
    res[e["id"]] = [i, ok]
print(json.dumps(res))
`;

describe('the converter', () => {
  it('fails each bad dump with a message that names it and still writes every good sample', async () => {
    const d = await fresh('faults', [
      ['g0', 12, 16, ''],
      ['short', 12, 16, 'short'],
      ['g1', 9, 16, ''],
      ['long', 12, 16, 'long'],
      ['nofinal', 12, 16, 'nofinal'],
      ['rank1', 12, 16, 'rank1'],
      ['sha', 12, 16, 'sha'],
      ['gone', 12, 16, 'nodump'],
      ['g2', 30, 16, ''],
    ]);
    await writeFile(
      join(d, 'ids.jsonl'),
      (await readFile(join(d, 'ids.jsonl'), 'utf8')) + '{"id": "bad-tok", "error": "no assistant turn"}\n',
    );
    const args = [
      '--dumps',
      join(d, 'dumps'),
      '--ids',
      join(d, 'ids.jsonl'),
      '--out',
      join(d, 'out'),
      '--file-group-size',
      '2',
      '--threads',
      '4',
    ];
    const r = await convert(...args);
    expect(r.code).toBe(1);
    const fail = (id: string) => r.lines.find((l) => l.startsWith(`FAIL ${id}\t`)) ?? '';
    expect(fail('short')).toMatch(
      /aux_hidden_state has 11 tokens and hidden_state 11, the sample's ids 12 \(short by one token/,
    );
    expect(fail('long')).toMatch(/has 14 tokens and hidden_state 14, the sample's ids 12$/);
    expect(fail('nofinal')).toMatch(/no hidden_state tensor \(the final post-norm state was not captured\)/);
    expect(fail('rank1')).toMatch(/written by tp_rank 1; only rank 0's dump is read/);
    expect(fail('sha')).toMatch(
      /input_ids_sha256 [0-9a-f]{64} is not the sha256 of the sample's ids [0-9a-f]{64} \(the dump is of another prompt\)/,
    );
    expect(r.lines).toContain(`MISSING gone\tno ${join(d, 'dumps', 'gone.safetensors')}`);
    expect(r.lines).toContain(
      'REJECTED bad-tok\ttokenization failed (' + join(d, 'ids.jsonl') + ' line 10): no assistant turn',
    );
    expect(r.lines.filter((l) => l.startsWith('OK '))).toEqual([
      `OK 0 g0 12 ${await sizeOf(d, 'rows_0-2/data_0.ckpt')}`,
      `OK 1 g1 9 ${await sizeOf(d, 'rows_0-2/data_1.ckpt')}`,
      `OK 2 g2 30 ${await sizeOf(d, 'rows_2-4/data_2.ckpt')}`,
    ]);
    expect(r.lines.at(-1)).toBe('END written=3 skipped=0 missing=1 rejected=1 failed=5');
    expect(JSON.parse(await py(SAME_AS_DUMP, join(d, 'out'), join(d, 'dumps'), join(d, 'ids.jsonl'), '2'))).toEqual({
      g0: [0, true],
      g1: [1, true],
      g2: [2, true],
    });
    expect(await filesUnder(join(d, 'out'))).toEqual([
      'index.jsonl',
      'rows_0-2',
      'rows_0-2/data_0.ckpt',
      'rows_0-2/data_1.ckpt',
      'rows_2-4',
      'rows_2-4/data_2.ckpt',
    ]);

    // Rerun: what is done is skipped; a repaired dump joins at the next index; a torn index line is cut off.
    await py(
      MAKE_DUMPS.replace('with open(out + "/ids.jsonl", "a")', 'with open("/dev/null", "a")'),
      d,
      JSON.stringify([['short', 12, 16, '']]),
    );
    await writeFile(
      join(d, 'out/index.jsonl'),
      (await readFile(join(d, 'out/index.jsonl'), 'utf8')) + '{"i": 7, "id": "tor',
    );
    const again = await convert(...args);
    expect(again.lines.filter((l) => /^(OK|SKIP) /.test(l))).toEqual([
      'SKIP 0 g0',
      `OK 3 short 12 ${await sizeOf(d, 'rows_2-4/data_3.ckpt')}`,
      'SKIP 1 g1',
      'SKIP 2 g2',
    ]);
    expect(again.lines.at(-1)).toBe('END written=1 skipped=3 missing=1 rejected=1 failed=4');
    const index = (await readFile(join(d, 'out/index.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number; id: string });
    expect(index.map((e) => [e.i, e.id])).toEqual([
      [0, 'g0'],
      [1, 'g1'],
      [2, 'g2'],
      [3, 'short'],
    ]);

    // A file that went bad after it was indexed is written again under its own index.
    const f1 = join(d, 'out/rows_0-2/data_1.ckpt');
    const good = await readFile(f1);
    await writeFile(f1, good.subarray(0, good.length - 100));
    const third = await convert(...args);
    expect(third.lines.find((l) => l.startsWith('REDO 1 g1\t'))).toBeDefined();
    expect(third.lines).toContain(`OK 1 g1 9 ${good.length}`);
    expect((await readFile(f1)).equals(good)).toBe(true);
  });

  it('with --remove-dumps, runs batch by batch as aerie does: numbering continues, a rerun SKIPs and deletes, a FAIL keeps its dump', async () => {
    // aerie runs the converter once per batch with --ids holding only that batch.
    const d = await fresh('batches', [
      ['b1a', 10, 16, ''],
      ['b1b', 7, 16, ''],
      ['b1short', 12, 16, 'short'],
      ['b1gone', 5, 16, 'nodump'],
    ]);
    await rename(join(d, 'ids.jsonl'), join(d, 'batch1.jsonl'));
    await py(
      MAKE_DUMPS,
      d,
      JSON.stringify([
        ['b2a', 6, 16, ''],
        ['b2b', 9, 16, ''],
        ['b2c', 3, 16, ''],
      ]),
    );
    await rename(join(d, 'ids.jsonl'), join(d, 'batch2.jsonl'));
    const run = (batch: string) =>
      convert(
        '--dumps',
        join(d, 'dumps'),
        '--ids',
        join(d, batch),
        '--out',
        join(d, 'out'),
        '--file-group-size',
        '2',
        '--remove-dumps',
        '--threads',
        '3',
      );
    const dumps = async () => (await readdir(join(d, 'dumps'))).sort();
    const at = (i: number) => `rows_${i - (i % 2)}-${i - (i % 2) + 2}/data_${i}.ckpt`;

    const first = await run('batch1.jsonl');
    expect(first.code).toBe(1);
    expect(first.lines.filter((l) => /^(OK|SKIP) /.test(l))).toEqual([
      `OK 0 b1a 10 ${await sizeOf(d, at(0))}`,
      `OK 1 b1b 7 ${await sizeOf(d, at(1))}`,
    ]);
    expect(first.lines.find((l) => l.startsWith('FAIL b1short\t'))).toMatch(/short by one token/);
    expect(first.lines.at(-1)).toBe('END written=2 skipped=0 missing=1 rejected=0 failed=1');
    // batch 2's dumps are not this run's business; the failed one stays for the caller to judge
    expect(await dumps()).toEqual(['b1short.safetensors', 'b2a.safetensors', 'b2b.safetensors', 'b2c.safetensors']);

    // a temp file a killed run left behind is swept; the converter runs alone on its folder
    await writeFile(join(d, 'out/rows_0-2/.data_1.ckpt.99999.tmp'), 'half a file');
    const second = await run('batch2.jsonl');
    expect(second.code).toBe(0);
    expect(existsSync(join(d, 'out/rows_0-2/.data_1.ckpt.99999.tmp'))).toBe(false);
    expect(second.lines).toEqual([
      `OK 2 b2a 6 ${await sizeOf(d, at(2))}`,
      `OK 3 b2b 9 ${await sizeOf(d, at(3))}`,
      `OK 4 b2c 3 ${await sizeOf(d, at(4))}`,
      'END written=3 skipped=0 missing=0 rejected=0 failed=0',
    ]);
    expect(await dumps()).toEqual(['b1short.safetensors']);

    // A rerun of batch 2 after a crash that left one dump behind: SKIP, and that dump goes.
    await py(
      MAKE_DUMPS.replace('with open(out + "/ids.jsonl", "a")', 'with open("/dev/null", "a")'),
      d,
      JSON.stringify([['b2b', 9, 16, '']]),
    );
    const rerun = await run('batch2.jsonl');
    expect(rerun.lines).toEqual([
      'SKIP 2 b2a',
      'SKIP 3 b2b',
      'SKIP 4 b2c',
      'END written=0 skipped=3 missing=0 rejected=0 failed=0',
    ]);
    expect(await dumps()).toEqual(['b1short.safetensors']);

    // Batch 1 again with its failed sample captured anew: it joins after batch 2's numbers.
    await py(
      MAKE_DUMPS.replace('with open(out + "/ids.jsonl", "a")', 'with open("/dev/null", "a")'),
      d,
      JSON.stringify([['b1short', 12, 16, '']]),
    );
    const again = await run('batch1.jsonl');
    expect(again.lines.filter((l) => /^(OK|SKIP) /.test(l))).toEqual([
      'SKIP 0 b1a',
      'SKIP 1 b1b',
      `OK 5 b1short 12 ${await sizeOf(d, at(5))}`,
    ]);
    expect(await dumps()).toEqual([]);
    const index = (await readFile(join(d, 'out/index.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number; id: string; tokens: number });
    expect(index.map((e) => [e.i, e.id, e.tokens])).toEqual([
      [0, 'b1a', 10],
      [1, 'b1b', 7],
      [2, 'b2a', 6],
      [3, 'b2b', 9],
      [4, 'b2c', 3],
      [5, 'b1short', 12],
    ]);

    // The reference reader (src/stages/extract/offline-verify.ts) finds six good files of the sizes the OK lines gave.
    const verified = (await pythonOutAsync(VERIFY_SCRIPT, [join(d, 'out'), '16', 'off'], { pythonPath: false }))
      .trim()
      .split('\n');
    const okSizes = [...first.lines, ...second.lines, ...again.lines]
      .filter((l) => l.startsWith('OK '))
      .map((l) => l.split(' '))
      .map(([, i, , t, b]) => `OK ${i} ${b} ${t}`);
    expect(verified.slice(1).sort()).toEqual(['END 6', ...okSizes].sort());
  });

  it('writes on several threads yet renames, indexes and logs in file order; a failed write rewinds the samples planned after it, leaving no gap', async () => {
    const d = await fresh('rewind', [
      ['a', 20, 16, ''],
      ['b', 21, 16, ''],
      ['c', 22, 16, ''],
      ['d', 23, 16, ''],
    ]);
    await cp(join(d, 'dumps'), join(d, 'kept'), { recursive: true }); // --remove-dumps will take the originals
    const out = await py(
      String.raw`
import json, os, sys, threading
from aerie_hs import ckpt
d = sys.argv[1]
c_started = threading.Event()
real = ckpt._write_tmp
def patched(final, ids, mask, dump, fsync):
    if dump.path.endswith("/c.safetensors"):
        c_started.set()
    if dump.path.endswith("/b.safetensors"):
        # b fails only once c, planned after it, holds the next index (a guard, not a timing)
        if not c_started.wait(30):
            raise RuntimeError("c was never planned while b was in flight")
        raise OSError(28, "No space left on device")
    return real(final, ids, mask, dump, fsync)
ckpt._write_tmp = patched
lines = []
ckpt.convert(d + "/dumps", d + "/ids.jsonl", d + "/out", 10, log=lines.append, remove_dumps=True, threads=4)
print(json.dumps({"lines": lines, "files": sorted(os.listdir(d + "/out/rows_0-10")), "dumps": sorted(os.listdir(d + "/dumps"))}))
`,
      d,
    );
    const r = JSON.parse(out) as { lines: string[]; files: string[]; dumps: string[] };
    expect(r.lines).toEqual([
      `OK 0 a 20 ${await sizeOf(d, 'rows_0-10/data_0.ckpt')}`,
      'FAIL b\t[Errno 28] No space left on device',
      `OK 1 c 22 ${await sizeOf(d, 'rows_0-10/data_1.ckpt')}`,
      `OK 2 d 23 ${await sizeOf(d, 'rows_0-10/data_2.ckpt')}`,
      'END written=3 skipped=0 missing=0 rejected=0 failed=1',
    ]);
    expect(r.files).toEqual(['data_0.ckpt', 'data_1.ckpt', 'data_2.ckpt']); // c's first file, as data_2, went with the rewind
    expect(r.dumps).toEqual(['b.safetensors']);
    const index = (await readFile(join(d, 'out/index.jsonl'), 'utf8'))
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { i: number; id: string });
    expect(index.map((e) => [e.i, e.id])).toEqual([
      [0, 'a'],
      [1, 'c'],
      [2, 'd'],
    ]);
    // c's file is c's, its archive named data_1 (SAME_AS_DUMP reads data_<i>/...), every byte its dump's.
    expect(JSON.parse(await py(SAME_AS_DUMP, join(d, 'out'), join(d, 'kept'), join(d, 'ids.jsonl'), '10'))).toEqual({
      a: [0, true],
      c: [1, true],
      d: [2, true],
    });
    const verified = (await pythonOutAsync(VERIFY_SCRIPT, [join(d, 'out'), '16', 'off'], { pythonPath: false }))
      .trim()
      .split('\n');
    expect(verified.slice(1).sort()).toEqual([
      'END 3',
      `OK 0 ${await sizeOf(d, 'rows_0-10/data_0.ckpt')} 20`,
      `OK 1 ${await sizeOf(d, 'rows_0-10/data_1.ckpt')} 22`,
      `OK 2 ${await sizeOf(d, 'rows_0-10/data_2.ckpt')} 23`,
    ]);
  });

  it("gets every CRC right when a tensor spans several copy parts (Python's zipfile checks them on read)", async () => {
    // 1500 × 3072 bf16 = 9.2 MB: nine 1 MiB parts copied and CRC'd on the pool's threads, the last one short.
    const d = await fresh('big', [
      ['big', 1500, 1024, ''],
      ['small', 3, 1024, ''],
    ]);
    expect(
      (
        await convert(
          '--dumps',
          join(d, 'dumps'),
          '--ids',
          join(d, 'ids.jsonl'),
          '--out',
          join(d, 'out'),
          '--file-group-size',
          '8',
        )
      ).code,
    ).toBe(0);
    expect(JSON.parse(await py(SAME_AS_DUMP, join(d, 'out'), join(d, 'dumps'), join(d, 'ids.jsonl'), '8'))).toEqual({
      big: [0, true],
      small: [1, true],
    });
    expect(
      await py(String.raw`
import os, sys, zlib
from aerie_hs.torch_save import crc32_combine, PART
for n1, n2 in ((0, 5), (5, 0), (1, PART), (PART, PART), (3, PART + 7), (12345, 999)):
    a, b = os.urandom(n1), os.urandom(n2)
    assert crc32_combine(zlib.crc32(a), zlib.crc32(b), n2) == zlib.crc32(a + b), (n1, n2)
print("ok")
`),
    ).toBe('ok\n');
  });

  it('names rows_<g>-<g+G> from the global index, from --start-index on, and leaves no temp file', async () => {
    const d = await fresh('groups', [
      ['a', 4, 8, ''],
      ['b', 4, 8, ''],
      ['c', 4, 8, ''],
      ['d', 4, 8, ''],
    ]);
    const r = await convert(
      '--dumps',
      join(d, 'dumps'),
      '--ids',
      join(d, 'ids.jsonl'),
      '--out',
      join(d, 'out'),
      '--file-group-size',
      '2',
      '--start-index',
      '3',
    );
    expect(r.code).toBe(0);
    expect(await filesUnder(join(d, 'out'))).toEqual([
      'index.jsonl',
      'rows_2-4',
      'rows_2-4/data_3.ckpt',
      'rows_4-6',
      'rows_4-6/data_4.ckpt',
      'rows_4-6/data_5.ckpt',
      'rows_6-8',
      'rows_6-8/data_6.ckpt',
    ]);
  });

  it('leaves neither the file nor its temp when a write dies half way, on a worker thread', async () => {
    // aux 3000 × 768 bf16 = 4.6 MB: five 1 MiB parts; the 4th pwrite is a part's.
    const d = await fresh('crash', [['x', 3000, 256, '']]);
    const out = await py(
      String.raw`
import sys, os, json, threading
from concurrent.futures import ThreadPoolExecutor
from aerie_hs import ckpt, torch_save
from aerie_hs.safetensors_dump import read_header
row = json.loads(open(sys.argv[1] + "/ids.jsonl").readline())
calls, where = [], []
real = os.pwrite
def dying(fd, b, at):
    calls.append(len(b))
    if len(calls) == 4:
        where.append(threading.current_thread() is threading.main_thread())
        raise OSError(28, "No space left on device")
    return real(fd, b, at)
torch_save.os.pwrite = dying
os.makedirs(sys.argv[1] + "/out")
try:
    with ThreadPoolExecutor(1) as pool:
        pool.submit(ckpt.write_features, sys.argv[1] + "/out/data_0.ckpt", row["input_ids"], row["loss_mask"], read_header(sys.argv[1] + "/dumps/x.safetensors")).result()
except OSError as e:
    print("raised", e.strerror, "on the main thread" if where[0] else "on a worker thread")
print(sorted(os.listdir(sys.argv[1] + "/out")))
`,
      d,
    );
    expect(out.trim().split('\n')).toEqual(['raised No space left on device on a worker thread', '[]']);
    expect(existsSync(join(d, 'out/data_0.ckpt'))).toBe(false);
  });

  it('refuses a usage error with exit status 2 and says which flag', async () => {
    const r = await convert(
      '--dumps',
      join(dir, 'nowhere'),
      '--ids',
      join(dir, 'none.jsonl'),
      '--out',
      join(dir, 'o'),
      '--file-group-size',
      '0',
    );
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--file-group-size must be > 0/);
  });
});
