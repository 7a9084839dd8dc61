/**
 * aerie-sim as stock SGLang 0.5.23 returning hidden states over HTTP: aerie's real stock client
 * (py/aerie_hs/stock_client.py, an aux pass and a final pass) makes dumps the self-check passes,
 * holding the very values the capture plugin dumps for the same ids; radix reuse loses rows as
 * the real server does; a server launched without the flags refuses the request.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CAPTURE_ARGS,
  DRAFT_IDS,
  type IdsRow,
  PY,
  captureEnv,
  jsonl,
  makeTarget,
  prefill,
  regenerate,
  run,
  selfcheck,
  stagePlugin,
  tokens,
} from '../support/sim-capture.js';
import { Sim, tempDir } from '../support/sim-sglang.js';
import { removeWorkdir } from '../support/workdir.js';

const AUX_ARGS = [
  '--enable-return-aux-hidden-states',
  '--speculative-algorithm',
  'EAGLE3',
  '--return-aux-hidden-state-layer-ids',
  ...DRAFT_IDS.map(String),
  '--disable-radix-cache',
  '--chunked-prefill-size',
  '-1',
];
const FINAL_ARGS = ['--enable-return-hidden-states', '--disable-radix-cache', '--chunked-prefill-size', '-1'];

let target: string;
let work: string;
let rows: IdsRow[];

beforeAll(async () => {
  [target, work] = await Promise.all([makeTarget(), tempDir('aerie-stock-sim-')]);
});
afterAll(async () => {
  for (const d of [target, work]) if (d) await removeWorkdir(d);
});

async function withSim<T>(args: string[], env: Record<string, string>, body: (sim: Sim) => Promise<T>): Promise<T> {
  const sim = await Sim.start(['--model-path', target, ...args], env);
  try {
    await sim.ready();
    return await body(sim);
  } finally {
    await sim.stop();
  }
}

function stockClient(port: number, pass: 'aux' | 'final', dumps: string, ids: string, extra: string[]) {
  return run(
    'python3',
    ['-m', 'aerie_hs.stock_client', '--port', String(port), '--ids', ids, '--dumps', dumps, '--pass', pass, ...extra],
    { env: { PYTHONPATH: PY } },
  );
}

/** The tensor bytes of a dump (header skipped), by name. */
async function tensorBytes(file: string): Promise<Record<string, Buffer>> {
  const b = await fs.readFile(file);
  const n = Number(b.readBigUInt64LE(0));
  const header = JSON.parse(b.subarray(8, 8 + n).toString('utf8')) as Record<
    string,
    { data_offsets: [number, number] }
  >;
  const out: Record<string, Buffer> = {};
  for (const [k, v] of Object.entries(header))
    if (k !== '__metadata__') out[k] = b.subarray(8 + n + v.data_offsets[0], 8 + n + v.data_offsets[1]);
  return out;
}

describe('stock SGLang 0.5.23 on the simulator: hidden states over HTTP', () => {
  it("two passes of the stock client make dumps the self-check passes, equal to the capture plugin's", async () => {
    const dumps = path.join(work, 'stock');
    await fs.mkdir(dumps);
    const ids = path.join(work, 'ids.jsonl');
    const greedy = path.join(work, 'greedy.jsonl');
    await withSim(AUX_ARGS, {}, async (sim) => {
      rows = await tokens(target, (await regenerate(sim)).slice(0, 3));
      await fs.writeFile(ids, jsonl(rows));
      const r = await stockClient(sim.port, 'aux', dumps, ids, [
        '--aux-layers',
        JSON.stringify(DRAFT_IDS.map((i) => i + 1)),
      ]);
      expect(
        r.stdout
          .trim()
          .split('\n')
          .filter((l) => l.startsWith('PART ')),
      ).toHaveLength(rows.length);
    });
    await withSim(FINAL_ARGS, {}, async (sim) => {
      const r = await stockClient(sim.port, 'final', dumps, ids, ['--greedy', greedy]);
      expect(
        r.stdout
          .trim()
          .split('\n')
          .filter((l) => l.startsWith('OK ')),
      ).toHaveLength(rows.length);
    });
    const { code, verdict } = await selfcheck(target, dumps, ids, greedy);
    expect(verdict.messages).toEqual([]);
    expect(code).toBe(0);

    const plugin = await stagePlugin();
    const captured = path.join(work, 'captured');
    await fs.mkdir(captured);
    try {
      await withSim(CAPTURE_ARGS, captureEnv(plugin, captured), (sim) => prefill(sim, rows));
    } finally {
      await removeWorkdir(plugin);
    }
    for (const row of rows) {
      const a = await tensorBytes(path.join(dumps, `${row.id}.safetensors`));
      const b = await tensorBytes(path.join(captured, `${row.id}.safetensors`));
      expect(a.aux_hidden_state.equals(b.aux_hidden_state), row.id).toBe(true);
      expect(a.hidden_state.equals(b.hidden_state), row.id).toBe(true);
    }
  }, 120_000);

  it('with the radix cache on, a repeated prompt returns only its uncached rows', async () => {
    const args = AUX_ARGS.filter((a) => a !== '--disable-radix-cache');
    const ids = [0, 3, 981, 4, 512, 642, 645, 647, 519, 797];
    const body = { input_ids: ids, return_hidden_states: true, sampling_params: { max_new_tokens: 1, temperature: 0 } };
    await withSim(args, {}, async (sim) => {
      // The health probes' [0] is in the cache already, so even the first prompt may lose its BOS row.
      const first = await sim.json('/generate', body);
      expect(first.body.meta_info.hidden_states).toHaveLength(1);
      expect(first.body.meta_info.hidden_states[0]).toHaveLength(ids.length - first.body.meta_info.cached_tokens);
      expect(first.body.meta_info.hidden_states[0][0]).toHaveLength(3 * 512);
      const again = await sim.json('/generate', body);
      const cached = again.body.meta_info.cached_tokens as number;
      expect(cached).toBe(ids.length - 1);
      expect(again.body.meta_info.hidden_states[0]).toHaveLength(1);
    });
  }, 60_000);

  it("a server without a hidden-state mode refuses return_hidden_states with 0.5.23's message", async () => {
    await withSim([], {}, async (sim) => {
      const r = await sim.json('/generate', {
        input_ids: [0, 5],
        return_hidden_states: true,
        sampling_params: { max_new_tokens: 1 },
      });
      expect(r.status).toBe(400);
      expect(r.body.error.message).toContain('The server is not configured to return hidden states.');
    });
  }, 60_000);
});
