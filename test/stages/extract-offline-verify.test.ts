/**
 * aerie's check of SpecForge feature files (src/stages/extract/offline-verify.ts), run with the
 * host's python3 (stdlib only): the simulator's files and one real torch.save file pass; a
 * file whose data.pkl is text, a storage shorter than its tensor, a missing key, a global a
 * weights-only torch.load refuses, and a file cut short each fail, named with the reason. With
 * a `torch` importable in that interpreter (a stub here), each file is also torch.load-ed.
 */
import { chmod, copyFile, mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import type { LocalHost } from '../../src/hosts/local/local-host.js';
import { verifyOffline } from '../../src/stages/extract/offline-verify.js';
import {
  hiddenStateEntries,
  planZip,
  torchSaveEntries,
  writeZip,
  type ZipEntry,
} from '../../sim/specforge/torch-zip.js';
import { useLocalHost } from '../support/local-host.js';

const FIXTURE = resolve(import.meta.dirname, '../fixtures/real/torch-2.13.0/data_0.ckpt');
const H = 8;

const fx = useLocalHost('aerie-verify-', { each: true, sub: 'host' });
let dir: string;
let root: string;
let host: LocalHost;

beforeEach(async () => {
  ({ dir, host } = fx);
  root = join(dir, 'hidden');
  await mkdir(join(root, 'rows_0-10'), { recursive: true });
});

const file = (i: number): string => join(root, 'rows_0-10', `data_${i}.ckpt`);
const put = (i: number, entries: ZipEntry[], truncateAt?: number): Promise<number> =>
  writeZip(file(i), entries, truncateAt);

describe('the offline feature-file check', () => {
  it("passes the simulator's files and a real torch 2.13 file, giving each file's token count", async () => {
    await put(0, hiddenStateEntries('data_0', 5, H, { inputIds: [1, 2, 3, 4, 5], lossMask: [0, 0, 1, 1, 1] }));
    await put(2, hiddenStateEntries('data_2', 9, H, { order: 'v0.2' }));
    await copyFile(FIXTURE, file(1));
    const r = await verifyOffline(host, 'python3', root, H);
    expect(r.bad).toEqual([]);
    expect([...r.ok.entries()].sort((a, b) => a[0] - b[0]).map(([i, f]) => [i, f.tokens])).toEqual([
      [0, 5],
      [1, 16],
      [2, 9],
    ]);
    expect(r.files).toBe(3);
    expect(r.torch).toBeUndefined();
  });

  it('fails, by file and with the reason, what no trainer could open', async () => {
    // 3: the simulator's old file: a line of text where the pickle should be.
    const text = Buffer.from(
      'aerie-sim: stands in for the pickle of {input_ids, loss_mask, hidden_state [1,4,8], aux_hidden_state [1,4,24]}\n',
    );
    await put(3, [
      { name: 'data_3/data.pkl', data: text },
      { name: 'data_3/byteorder', data: Buffer.from('little') },
      { name: 'data_3/data/0', data: 32 },
      { name: 'data_3/data/1', data: 32 },
      { name: 'data_3/data/2', data: 64 },
      { name: 'data_3/data/3', data: 192 },
      { name: 'data_3/version', data: Buffer.from('3\n') },
    ]);
    // 4: hidden_state's storage shorter than [1,4,8] bf16 needs.
    await put(
      4,
      hiddenStateEntries('data_4', 4, H).map((e) => (e.name === 'data_4/data/3' ? { ...e, data: 40 } : e)),
    );
    // 5: no aux_hidden_state.
    await put(
      5,
      torchSaveEntries('data_5', [
        { key: 'input_ids', dtype: 'int64', shape: [4] },
        { key: 'loss_mask', dtype: 'int64', shape: [4] },
        { key: 'hidden_state', dtype: 'bfloat16', shape: [1, 4, H] },
      ]),
    );
    // 6: a pickle that calls os.system: weights-only torch.load refuses the global.
    const evil = Buffer.concat([
      Buffer.from([0x80, 2]),
      Buffer.from('cos\nsystem\nX\x04\x00\x00\x00trueq\x00\x85R.', 'latin1'),
    ]);
    await put(6, [
      { name: 'data_6/data.pkl', data: evil },
      { name: 'data_6/version', data: Buffer.from('3\n') },
    ]);
    // 7: cut short mid-write: no zip directory.
    const whole = hiddenStateEntries('data_7', 4, H);
    await put(7, whole, Math.floor(planZip(whole).size / 2));
    // 8: loss_mask 2-D, as a trainer that unsqueezes it would choke on.
    await put(
      8,
      torchSaveEntries('data_8', [
        { key: 'input_ids', dtype: 'int64', shape: [4] },
        { key: 'loss_mask', dtype: 'int64', shape: [1, 4] },
        { key: 'aux_hidden_state', dtype: 'bfloat16', shape: [1, 4, 3 * H] },
        { key: 'hidden_state', dtype: 'bfloat16', shape: [1, 4, H] },
      ]),
    );
    const r = await verifyOffline(host, 'python3', root, H);
    expect(r.ok.size).toBe(0);
    const why = Object.fromEntries(r.bad.map((b) => [b.path, b.reason]));
    expect(Object.keys(why).sort()).toEqual([3, 4, 5, 6, 7, 8].map(file).sort());
    expect(why[file(3)]).toMatch(/^data\.pkl is not a pickle torch\.load can read: APPEND at byte 0 /);
    expect(why[file(4)]).toMatch(
      /data_4\/data\/3 is 40 bytes \(method 0\); the hidden_state storage needs 64 stored bytes/,
    );
    expect(why[file(5)]).toMatch(/no tensor for \['aux_hidden_state'\]/);
    expect(why[file(6)]).toMatch(/global os\.system at byte 2 is not one a weights-only torch\.load allows/);
    expect(why[file(7)]).toMatch(/not a zip file/i);
    expect(why[file(8)]).toMatch(/loss_mask int64 \[1, 4\] must be int64 \[T\]/);
  });

  it('checks the hidden size: states of another model are refused', async () => {
    await copyFile(FIXTURE, file(1));
    const r = await verifyOffline(host, 'python3', root, 16);
    expect(r.bad[0]!.reason).toMatch(
      /hidden_state \[1, 16, 8\] and aux_hidden_state \[1, 16, 24\] do not fit \[1,16,16\] and \[1,16,48\]/,
    );
  });

  it('where `import torch` works, also loads each file with it and reports what torch says', async () => {
    await copyFile(FIXTURE, file(1));
    await put(0, hiddenStateEntries('data_0', 16, H));
    // A stand-in torch: loads every file but data_0, giving SpecForge's shapes at T=16, H=8.
    const stub = join(dir, 'stub');
    await mkdir(join(stub, 'torch'), { recursive: true });
    await writeFile(
      join(stub, 'torch', '__init__.py'),
      [
        "__version__ = '0.0-stub'",
        'class _T:',
        '    def __init__(self, shape): self.shape = shape',
        'def load(path, map_location=None, weights_only=False, mmap=False):',
        "    assert weights_only and mmap, 'called without weights_only/mmap'",
        "    if path.endswith('data_0.ckpt'): raise RuntimeError('stub refuses ' + path)",
        "    return {'input_ids': _T((16,)), 'loss_mask': _T((16,)), 'hidden_state': _T((1, 16, 8)), 'aux_hidden_state': _T((1, 16, 24))}",
        '',
      ].join('\n'),
    );
    const python = join(dir, 'python-with-torch');
    await writeFile(python, `#!/bin/sh\nPYTHONPATH='${stub}' exec python3 "$@"\n`);
    await chmod(python, 0o755);
    const r = await verifyOffline(host, python, root, H);
    expect(r.torch).toBe('0.0-stub');
    expect([...r.ok.keys()]).toEqual([1]);
    expect(r.bad).toEqual([
      {
        path: file(0),
        reason: `torch 0.0-stub cannot load it (weights_only=True): RuntimeError: stub refuses ${file(0)}`,
      },
    ]);
  });
});
