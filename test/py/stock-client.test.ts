/**
 * py/aerie_hs/stock_client.py against a fake /generate server (python3 stdlib http.server).
 *
 * The fake is a test double of the RESPONSE SHAPE ONLY of stock sglang==0.5.23 (as
 * py/aerie_hs/CAPTURE.md "Stock path" cites it): {"text", "output_ids", "meta_info": {"id",
 * "prompt_tokens", ..., "hidden_states": [[T rows]]}} on success, HTTP 400 {"error": {"message"}}
 * on a refusal. It computes no model: its rows are a formula of the input ids, which this test
 * recomputes to judge the dumps, read back with a safetensors reader of the test's own.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../src/temporal/dev-server.js';
import { useProcessGroups } from '../support/processes.js';
import { python } from '../support/python.js';
import { useWorkdir } from '../support/workdir.js';

const H = 8;
const tmp = useWorkdir('aerie-stock-');
/** The fake servers, each in its own process group, SIGKILLed by its pgid after the file. */
const servers = useProcessGroups();

const FAKE = String.raw`
import json, sys, threading
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
mode, H = sys.argv[1], int(sys.argv[2])
lock, state = threading.Lock(), {"inflight": 0, "max_inflight": 0, "bodies": []}
def val(which, i, c):
    return ((i * 7 + c) % 251) / 4 if which == "aux" else -((i + 3 * c) % 251 + 1) / 4
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def reply(self, code, obj):
        raw = json.dumps(obj).encode()
        self.send_response(code); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw))); self.end_headers(); self.wfile.write(raw)
    def do_GET(self):
        with lock: self.reply(200, state)
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with lock:
            state["bodies"].append(body); state["inflight"] += 1
            state["max_inflight"] = max(state["max_inflight"], state["inflight"])
        try:
            if mode == "off":  # what a server launched without the flags answers (tokenizer_manager.py:1406)
                return self.reply(400, {"error": {"message": "The server is not configured to return hidden states."}})
            ids, rid = body["input_ids"], body["rid"]
            width = 3 * H if mode == "aux" else H
            rows = [[val(mode, i, c) for c in range(width)] for i in ids]
            t = len(ids)
            if rid == "f-short": rows = rows[1:]
            if rid == "f-count": t += 1
            hs = [rows[-1]] if rid == "f-last" else [rows]
            self.reply(200, {"text": "x", "output_ids": [ids[-1] + 1], "meta_info": {"id": rid, "finish_reason": {"type": "length", "length": 1},
                "prompt_tokens": t, "weight_version": "default", "num_retractions": 0, "reasoning_tokens": 0,
                "completion_tokens": 1, "cached_tokens": 0, "hidden_states": hs}})
        finally:
            with lock: state["inflight"] -= 1
srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
`;

async function fake(mode: 'aux' | 'final' | 'off'): Promise<number> {
  const p = servers.start('python3', ['-c', FAKE, mode, String(H)], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((res, rej) => {
    p.stdout!.once('data', (b: Buffer) => res(Number(b.toString().trim())));
    p.once('exit', (c) => rej(new Error(`fake server exited ${c}`)));
  });
}

async function record(port: number): Promise<{ max_inflight: number; bodies: Record<string, unknown>[] }> {
  return (await fetch(`http://127.0.0.1:${port}/`)).json() as Promise<{
    max_inflight: number;
    bodies: Record<string, unknown>[];
  }>;
}

async function client(...args: string[]): Promise<{ code: number; lines: string[] }> {
  const r = await python(['-m', 'aerie_hs.stock_client', ...args]);
  if (r.code === 0) return { code: 0, lines: r.stdout.trim().split('\n') };
  return { code: r.code ?? -1, lines: (r.stdout + r.stderr).trim().split('\n') };
}

function setup(
  name: string,
  samples: [string, number][],
): { dir: string; dumps: string; ids: string; rows: { id: string; input_ids: number[] }[] } {
  const dir = join(tmp.path, name);
  const dumps = join(dir, 'dumps');
  mkdirSync(dumps, { recursive: true });
  const rows = samples.map(([id, t]) => ({
    id,
    input_ids: Array.from({ length: t }, (_, k) => 1000 + 17 * k + id.length),
    loss_mask: Array(t).fill(1),
  }));
  writeFileSync(join(dir, 'ids.jsonl'), rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
  return { dir, dumps, ids: join(dir, 'ids.jsonl'), rows };
}

/** safetensors by its layout (u64 header length, JSON header, data), BF16 values decoded here. */
function readDump(path: string) {
  const b = readFileSync(path);
  const n = Number(b.readBigUInt64LE(0));
  const header = JSON.parse(b.subarray(8, 8 + n).toString('utf8'));
  const tensor = (name: string) => {
    const t = header[name];
    const raw = b.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]);
    const vals: number[] = [];
    for (let i = 0; i < raw.length; i += 2)
      vals.push(new Float32Array(new Uint32Array([raw.readUInt16LE(i) << 16]).buffer)[0]!);
    return { dtype: t.dtype as string, shape: t.shape as number[], vals };
  };
  return {
    meta: header.__metadata__ as Record<string, string>,
    aux: tensor('aux_hidden_state'),
    hidden: tensor('hidden_state'),
  };
}

const expected = (which: 'aux' | 'final', ids: number[]) => {
  const width = which === 'aux' ? 3 * H : H;
  return ids.flatMap((i) =>
    Array.from({ length: width }, (_, c) =>
      which === 'aux' ? ((i * 7 + c) % 251) / 4 : -(((i + 3 * c) % 251) + 1) / 4,
    ),
  );
};

function sha(ids: number[]): string {
  const le = Buffer.alloc(8 * ids.length);
  ids.forEach((v, i) => le.writeBigInt64LE(BigInt(v), 8 * i));
  return createHash('sha256').update(le).digest('hex');
}

describe('stock_client: two passes, one per 0.5.23 server launch, merged into aerie-hs/1 dumps', () => {
  it('writes a partial per pass, then the dump the converter takes; a rerun sends nothing', async () => {
    const s = setup('two-pass', [
      ['a', 5],
      ['b', 1],
      ['c', 12],
      ['d', 7],
      ['e', 3],
    ]);
    const aux = await fake('aux');
    const first = await client(
      '--port',
      String(aux),
      '--ids',
      s.ids,
      '--dumps',
      s.dumps,
      '--pass',
      'aux',
      '--aux-layers',
      '[2, 8, 14]',
      '--concurrency',
      '2',
      '--hidden-size',
      String(H),
    );
    expect(first).toEqual({
      code: 0,
      lines: [
        'PART a aux 5',
        'PART b aux 1',
        'PART c aux 12',
        'PART d aux 7',
        'PART e aux 3',
        'END parts=5 dumps=0 skipped=0 failed=0 rejected=0',
      ],
    });
    expect(readdirSync(s.dumps).sort()).toEqual([
      'a.aux.partial',
      'b.aux.partial',
      'c.aux.partial',
      'd.aux.partial',
      'e.aux.partial',
    ]);
    const rec = await record(aux);
    // requests arrive in any order (two in flight); each is exactly the stock request
    expect([...rec.bodies].sort((x, y) => String(x.rid).localeCompare(String(y.rid)))).toEqual(
      s.rows.map((r) => ({
        input_ids: r.input_ids,
        rid: r.id,
        return_hidden_states: true,
        sampling_params: { max_new_tokens: 1, temperature: 0 },
      })),
    );
    expect(rec.max_inflight).toBeLessThanOrEqual(2);

    const fin = await fake('final');
    const greedy = join(s.dir, 'greedy.jsonl');
    const second = await client(
      '--port',
      String(fin),
      '--ids',
      s.ids,
      '--dumps',
      s.dumps,
      '--pass',
      'final',
      '--greedy',
      greedy,
    );
    expect(second).toEqual({
      code: 0,
      lines: ['OK a 5', 'OK b 1', 'OK c 12', 'OK d 7', 'OK e 3', 'END parts=0 dumps=5 skipped=0 failed=0 rejected=0'],
    });
    expect(readdirSync(s.dumps).sort()).toEqual([
      'a.safetensors',
      'b.safetensors',
      'c.safetensors',
      'd.safetensors',
      'e.safetensors',
    ]);
    for (const r of s.rows) {
      const d = readDump(join(s.dumps, `${r.id}.safetensors`));
      const t = r.input_ids.length;
      expect(d.meta).toEqual({
        format: 'aerie-hs/1',
        rid: r.id,
        tokens: String(t),
        aux_layers: '[2, 8, 14]',
        tp_rank: '0',
        input_ids_sha256: sha(r.input_ids),
      });
      expect([d.aux.dtype, d.aux.shape, d.hidden.dtype, d.hidden.shape]).toEqual(['BF16', [t, 3 * H], 'BF16', [t, H]]);
      expect(d.aux.vals).toEqual(expected('aux', r.input_ids));
      expect(d.hidden.vals).toEqual(expected('final', r.input_ids));
    }
    expect(
      readFileSync(greedy, 'utf8')
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual(s.rows.map((r) => ({ id: r.id, greedy_next: r.input_ids.at(-1)! + 1 })));

    const sent = (await record(fin)).bodies.length;
    const again = await client('--port', String(fin), '--ids', s.ids, '--dumps', s.dumps, '--pass', 'final');
    expect(again.lines).toEqual([
      'SKIP a',
      'SKIP b',
      'SKIP c',
      'SKIP d',
      'SKIP e',
      'END parts=0 dumps=0 skipped=5 failed=0 rejected=0',
    ]);
    expect((await record(fin)).bodies.length).toBe(sent);

    const conv = await python([
      '-m',
      'aerie_hs.ckpt',
      'convert',
      '--dumps',
      s.dumps,
      '--ids',
      join(s.dir, 'ids.jsonl'),
      '--out',
      join(s.dir, 'out'),
      '--file-group-size',
      '4',
      '--hidden-size',
      String(H),
    ]);
    expect(conv.code, conv.stderr).toBe(0);
    expect(conv.stdout.trim().split('\n').at(-1)).toBe('END written=5 skipped=0 missing=0 rejected=0 failed=0');
  });

  it('merges in whichever pass comes second', async () => {
    const s = setup('final-first', [['x', 4]]);
    expect(
      (await client('--port', String(await fake('final')), '--ids', s.ids, '--dumps', s.dumps, '--pass', 'final'))
        .lines[0],
    ).toBe('PART x final 4');
    expect(
      (
        await client(
          '--port',
          String(await fake('aux')),
          '--ids',
          s.ids,
          '--dumps',
          s.dumps,
          '--pass',
          'aux',
          '--aux-layers',
          '[2,8,14]',
        )
      ).lines[0],
    ).toBe('OK x 4');
    expect(readDump(join(s.dumps, 'x.safetensors')).hidden.vals).toEqual(expected('final', s.rows[0]!.input_ids));
  });

  it('finishes a merge that died (both partials, no dump) without a request, and clears partials a finished merge left', async () => {
    const a = setup('merge-a', [['x', 4]]);
    const b = setup('merge-b', [['x', 4]]);
    const auxPort = await fake('aux');
    const finPort = await fake('final');
    await client(
      '--port',
      String(auxPort),
      '--ids',
      a.ids,
      '--dumps',
      a.dumps,
      '--pass',
      'aux',
      '--aux-layers',
      '[2, 8, 14]',
    );
    await client('--port', String(finPort), '--ids', b.ids, '--dumps', b.dumps, '--pass', 'final');
    copyFileSync(join(b.dumps, 'x.final.partial'), join(a.dumps, 'x.final.partial'));
    const sent = (await record(finPort)).bodies.length;
    expect(
      (await client('--port', String(finPort), '--ids', a.ids, '--dumps', a.dumps, '--pass', 'final')).lines[0],
    ).toBe('OK x 4');
    expect((await record(finPort)).bodies.length).toBe(sent);
    expect(readdirSync(a.dumps)).toEqual(['x.safetensors']);
    copyFileSync(join(b.dumps, 'x.final.partial'), join(a.dumps, 'x.final.partial'));
    expect(
      (
        await client(
          '--port',
          String(auxPort),
          '--ids',
          a.ids,
          '--dumps',
          a.dumps,
          '--pass',
          'aux',
          '--aux-layers',
          '[2, 8, 14]',
        )
      ).lines[0],
    ).toBe('SKIP x');
    expect(readdirSync(a.dumps)).toEqual(['x.safetensors']);
  });

  it('fails a sample whose rows are short, miscounted or last-only, naming the fix, writes its error file, and goes on', async () => {
    const s = setup('faults', [
      ['ok1', 6],
      ['f-short', 6],
      ['f-count', 6],
      ['f-last', 6],
      ['ok2', 2],
    ]);
    writeFileSync(s.ids, readFileSync(s.ids, 'utf8') + '{"id": "bad-tok", "error": "no assistant turn"}\n');
    const r = await client(
      '--port',
      String(await fake('aux')),
      '--ids',
      s.ids,
      '--dumps',
      s.dumps,
      '--pass',
      'aux',
      '--aux-layers',
      '[2, 8, 14]',
    );
    expect(r.code).toBe(1);
    const fail = (id: string) => r.lines.find((l) => l.startsWith(`FAIL ${id}\t`)) ?? '';
    expect(fail('f-short')).toMatch(
      /5 prefill rows for 6 prompt tokens: launch with --chunked-prefill-size -1 .* --disable-radix-cache/,
    );
    expect(fail('f-count')).toMatch(/the server counted 7 prompt tokens, the sample has 6/);
    expect(fail('f-last')).toMatch(/only the last token's state/);
    expect(r.lines).toContain(`REJECTED bad-tok\ttokenization failed (${s.ids} line 6): no assistant turn`);
    expect(r.lines.filter((l) => l.startsWith('PART '))).toEqual(['PART ok1 aux 6', 'PART ok2 aux 2']);
    expect(r.lines.at(-1)).toBe('END parts=2 dumps=0 skipped=0 failed=3 rejected=1');
    const err = JSON.parse(readFileSync(join(s.dumps, 'f-short.error.json'), 'utf8'));
    expect(err).toEqual({ format: 'aerie-hs/1', rid: 'f-short', error: expect.stringMatching(/5 prefill rows for 6/) });
    expect(readdirSync(s.dumps).sort()).toEqual([
      'f-count.error.json',
      'f-last.error.json',
      'f-short.error.json',
      'ok1.aux.partial',
      'ok2.aux.partial',
    ]);
  });

  it("reports a server without the flags (SGLang's 400) and a pass run against the other server", async () => {
    const s = setup('wrong-server', [['w', 3]]);
    const off = await client(
      '--port',
      String(await fake('off')),
      '--ids',
      s.ids,
      '--dumps',
      s.dumps,
      '--pass',
      'aux',
      '--aux-layers',
      '[2, 8, 14]',
    );
    expect(off.lines[0]).toBe(
      'FAIL w\tthe server refused the request (HTTP 400): The server is not configured to return hidden states.',
    );
    const swapped = await client(
      '--port',
      String(await fake('aux')),
      '--ids',
      s.ids,
      '--dumps',
      s.dumps,
      '--pass',
      'final',
      '--hidden-size',
      String(H),
    );
    expect(swapped.lines[0]).toMatch(/^FAIL w\tfinal rows are 24 wide, hidden size is 8 \(is this server the aux one/);
    expect(existsSync(join(s.dumps, 'w.error.json'))).toBe(true);
  });

  it('stops with exit 3 and no error files when nothing answers on the port', async () => {
    const s = setup('unreachable', [
      ['u1', 3],
      ['u2', 3],
    ]);
    const port = await freePort();
    const r = await client(
      '--port',
      String(port),
      '--ids',
      s.ids,
      '--dumps',
      s.dumps,
      '--pass',
      'aux',
      '--aux-layers',
      '[2, 8, 14]',
    );
    expect(r.code).toBe(3);
    expect(r.lines.find((l) => l.startsWith('ABORT\t'))).toMatch(
      /the server stopped answering: http:\/\/127\.0\.0\.1:\d+\/generate/,
    );
    expect(readdirSync(s.dumps)).toEqual([]);
  });

  it('refuses --pass aux without the three capture ids (exit 2)', async () => {
    const s = setup('usage', [['z', 1]]);
    const r = await client('--port', '1', '--ids', s.ids, '--dumps', s.dumps, '--pass', 'aux');
    expect(r.code).toBe(2);
    expect(r.lines.join('\n')).toMatch(/--pass aux needs --aux-layers, the three SGLang capture ids as JSON/);
  });
});

describe('stock_client.bf16_bytes', () => {
  it('keeps bf16 values exact and rounds others to nearest even (hand-derived bit patterns)', async () => {
    const out = await python([
      '-c',
      String.raw`
import struct
from aerie_hs.stock_client import bf16_bytes
vals = [1.5, -2.25, 0.1, 1 / 3, 1.00390625, 1.01171875, 0.0]
print(" ".join("%04x" % x for x in struct.unpack("<%dH" % len(vals), bf16_bytes(vals))))
`,
    ]);
    expect(out.code, out.stderr).toBe(0);
    // 0.1 = f32 3dcccccd -> 3dcd; 1/3 = 3eaaaaab -> 3eab; 1+2^-8 = 3f808000 (a tie) -> even 3f80; 1+3*2^-8 = 3f818000 -> even 3f82
    expect(out.stdout.trim()).toBe('3fc0 c010 3dcd 3eab 3f80 3f82 0000');
  });
});
