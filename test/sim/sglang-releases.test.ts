/**
 * The simulator's release profiles judged by one table of conformance checks (conformance.md
 * S2, S4, S6, S7, S10, S11, S14 and the routes/health rows): every check observes one behaviour
 * of a running `aerie-sim sglang --version X` and names what each release does, with the wheel
 * source. The sims at 0.5.4, 0.5.9, 0.5.12 and 0.5.23 each pass their own release's checks and fail every
 * other release's check wherever the two releases differ (issue 13's Done-when).
 * All three serve a Qwen2 target (auto speculative parameters differ there) with EAGLE3.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimTokenizer } from '../../sim/sglang/tokenizer.js';
import { readPhase } from '../../src/sglang/log-phase.js';
import { type Sim, startSim, stopSim } from '../support/sim.js';
import { MODEL, makeDrafter, tempDir, until } from '../support/sim-sglang.js';
import { removeWorkdir } from '../support/workdir.js';

const RELEASES = ['0.5.4', '0.5.9', '0.5.12', '0.5.23'] as const;
type Release = (typeof RELEASES)[number];

interface Check {
  name: string;
  /** Where each release's behaviour is written (the rules, with line numbers, are in sim/sglang/profile.ts). */
  source: string;
  observe(s: Running): Promise<unknown>;
  expected: Record<Release, unknown>;
}

interface Running {
  sim: Sim;
  /** Waits until everything the server logged before now is in sim.log(). */
  settle(): Promise<void>;
  get(p: string): Promise<{ status: number; body: any }>;
  post(p: string, body: unknown): Promise<{ status: number; body: any; text: string }>;
}

const tok = SimTokenizer.forModel(MODEL);
const WARMUP_GETS = /"GET (\/get_model_info|\/model_info) HTTP\/1\.1"/;
const SPEC_V2_LINE = /(Overlap scheduler is disabled.*|Spec v[12] .*|Beta spec .*|Non-overlap .*)$/;
const sse = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6))
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
const specKeys = (m: Record<string, unknown>) =>
  Object.keys(m)
    .filter((k) => k.startsWith('spec_'))
    .sort();
const messageOf = (log: string, re: RegExp) =>
  log
    .split('\n')
    .map((l) => re.exec(l)?.[1]?.trim())
    .filter((m): m is string => m !== undefined);
const probes = (log: string) => (log.match(/Prefill batch\. #new-seq: 1, #new-token: 1, /g) ?? []).length;

const CHECKS: Check[] = [
  {
    name: 'the warmup reads /get_model_info (0.5.4) or /model_info (0.5.9 on)',
    source: 'sglang==0.5.4:srt/entrypoints/http_server.py:1446; sglang==0.5.9:…:1678; sglang==0.5.23:…:2374',
    observe: async (s) => WARMUP_GETS.exec(s.sim.log())?.[1],
    expected: { '0.5.4': '/get_model_info', '0.5.9': '/model_info', '0.5.12': '/model_info', '0.5.23': '/model_info' },
  },
  {
    name: '/get_server_info reports the release',
    source:
      'http_server.py "version": __version__ (sglang==0.5.4:srt/entrypoints/http_server.py:506; sglang==0.5.23 server_info)',
    observe: async (s) => (await s.get('/get_server_info')).body.version,
    expected: { '0.5.4': '0.5.4', '0.5.9': '0.5.9', '0.5.12': '0.5.12', '0.5.23': '0.5.23' },
  },
  {
    name: "/server_info is FastAPI's 404 on 0.5.4, the server info from 0.5.9",
    source: 'sglang==0.5.4:srt/entrypoints/http_server.py:496 (only /get_server_info); sglang==0.5.9:…:593',
    observe: async (s) => {
      const r = await s.get('/server_info');
      return r.status === 404 ? r.body : r.status;
    },
    expected: { '0.5.4': { detail: 'Not Found' }, '0.5.9': 200, '0.5.12': 200, '0.5.23': 200 },
  },
  {
    name: '/model_info likewise',
    source: 'sglang==0.5.4:srt/entrypoints/http_server.py:475 (only /get_model_info); sglang==0.5.9:…:553',
    observe: async (s) => (await s.get('/model_info')).status,
    expected: { '0.5.4': 404, '0.5.9': 200, '0.5.12': 200, '0.5.23': 200 },
  },
  {
    name: '/get_model_info has model_type and architectures from 0.5.9',
    source: 'sglang==0.5.4:srt/entrypoints/http_server.py:478-484; sglang==0.5.9:…:557-570',
    observe: async (s) => 'architectures' in (await s.get('/get_model_info')).body,
    expected: { '0.5.4': false, '0.5.9': true, '0.5.12': true, '0.5.23': true },
  },
  {
    name: '/get_server_info logs its deprecation from 0.5.9',
    source: 'sglang==0.5.9:srt/entrypoints/http_server.py:586-589; sglang==0.5.23:…:856-859',
    observe: async (s) => {
      await s.get('/get_server_info');
      await s.settle();
      return s.sim.log().includes("Endpoint '/get_server_info' is deprecated");
    },
    expected: { '0.5.4': false, '0.5.9': true, '0.5.12': true, '0.5.23': true },
  },
  {
    name: 'with SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false, /health still probes on 0.5.4 only',
    source:
      'sglang==0.5.4:srt/entrypoints/http_server.py:403-472 (no such variable); sglang==0.5.9:…:481-485, environ.py:462',
    observe: async (s) => {
      await s.settle();
      const before = probes(s.sim.log());
      expect((await s.get('/health')).status).toBe(200);
      await s.settle();
      return probes(s.sim.log()) - before;
    },
    expected: { '0.5.4': 1, '0.5.9': 0, '0.5.12': 0, '0.5.23': 0 },
  },
  {
    name: '/health_generate probes in every release',
    source:
      'the same route in every release (sglang==0.5.9:srt/entrypoints/http_server.py:465: the variable spares only /health)',
    observe: async (s) => {
      await s.settle();
      const before = probes(s.sim.log());
      expect((await s.get('/health_generate')).status).toBe(200);
      await s.settle();
      return probes(s.sim.log()) - before;
    },
    expected: { '0.5.4': 1, '0.5.9': 1, '0.5.12': 1, '0.5.23': 1 },
  },
  {
    name: 'a streamed /generate sends output_ids as deltas (0.5.4) or cumulative (0.5.9 on, without --stream-output or --incremental-streaming-output)',
    source:
      'sglang==0.5.4:srt/managers/tokenizer_manager.py:1393-1407; sglang==0.5.9:…:1550-1566; sglang==0.5.23:…:2629-2670',
    observe: async (s) => {
      const r = await s.post('/generate', {
        text: 'stream the ids please',
        stream: true,
        sampling_params: { max_new_tokens: 24, ignore_eos: true },
      });
      const chunks = sse(r.text).filter((c) => c !== '[DONE]');
      const lens = chunks.map((c) => c.output_ids.length);
      const total = chunks.at(-1).meta_info.completion_tokens;
      if (lens.reduce((a: number, b: number) => a + b, 0) === total && chunks.length > 1) return 'deltas';
      if (lens.at(-1) === total) return 'cumulative';
      return lens;
    },
    expected: { '0.5.4': 'deltas', '0.5.9': 'cumulative', '0.5.12': 'cumulative', '0.5.23': 'cumulative' },
  },
  {
    name: 'speculative fields only on the finished chunk',
    source:
      '_calculate_spec_decoding_metrics runs when finished (sglang==0.5.4:srt/managers/tokenizer_manager.py:1431-1433; sglang==0.5.23:…:2755-2756)',
    observe: async (s) => {
      const r = await s.post('/generate', {
        text: 'speculate over a stream',
        stream: true,
        sampling_params: { max_new_tokens: 40, ignore_eos: true },
      });
      const chunks = sse(r.text).filter((c) => c !== '[DONE]');
      return {
        before: chunks.slice(0, -1).some((c) => specKeys(c.meta_info).length > 0),
        last: specKeys(chunks.at(-1).meta_info).length > 0,
      };
    },
    expected: {
      '0.5.4': { before: false, last: true },
      '0.5.9': { before: false, last: true },
      '0.5.12': { before: false, last: true },
      '0.5.23': { before: false, last: true },
    },
  },
  {
    name: 'the speculative field names of meta_info',
    source:
      'sglang==0.5.4:srt/managers/tokenizer_manager.py:1593-1616; sglang==0.5.9:…:1836-1867; sglang==0.5.12:…:2143-2156; sglang==0.5.23:…:3164-3201',
    observe: async (s) =>
      specKeys(
        (
          await s.post('/generate', {
            text: 'name the fields',
            sampling_params: { max_new_tokens: 40, ignore_eos: true },
          })
        ).body.meta_info,
      ),
    expected: {
      '0.5.4': ['spec_accept_length', 'spec_accept_rate', 'spec_verify_ct'],
      // The per-request acceptance histogram from 0.5.9 (sglang==0.5.9:…:1859-1867), renamed in 0.5.12
      // with the old name kept as an alias (sglang==0.5.12:…:2149-2156), only the new name in 0.5.23 (:3199).
      '0.5.9': [
        'spec_accept_histogram',
        'spec_accept_length',
        'spec_accept_rate',
        'spec_accept_token_num',
        'spec_draft_token_num',
        'spec_verify_ct',
      ],
      // 0.5.12's backward-compat aliases (sglang==0.5.12:srt/managers/tokenizer_manager.py:2139-2141), gone in 0.5.23.
      '0.5.12': [
        'spec_accept_histogram',
        'spec_accept_length',
        'spec_accept_rate',
        'spec_accepted_drafts',
        'spec_correct_drafts_histogram',
        'spec_num_correct_drafts',
        'spec_num_proposed_drafts',
        'spec_proposed_drafts',
        'spec_verify_ct',
      ],
      '0.5.23': [
        'spec_accept_length',
        'spec_accept_rate',
        'spec_correct_drafts_histogram',
        'spec_num_correct_drafts',
        'spec_num_proposed_drafts',
        'spec_verify_ct',
      ],
    },
  },
  {
    name: 'a request that never reaches a verify: zeros (0.5.4) or no speculative fields (0.5.9 on)',
    source:
      'sglang==0.5.4:srt/managers/tokenizer_manager.py:1593-1595; sglang==0.5.9:…:1837-1841 (verify_ct > 0 first)',
    observe: async (s) => {
      const m = (await s.post('/generate', { text: 'one token only', sampling_params: { max_new_tokens: 1 } })).body
        .meta_info;
      return Object.fromEntries(specKeys(m).map((k) => [k, m[k]]));
    },
    expected: {
      '0.5.4': { spec_accept_length: 0, spec_accept_rate: 0, spec_verify_ct: 0 },
      '0.5.9': {},
      '0.5.12': {},
      '0.5.23': {},
    },
  },
  {
    name: 'what the release logs about spec v2 under EAGLE3 (S2)',
    source:
      'sglang==0.5.4:srt/server_args.py:1296-1306; sglang==0.5.9:…:2368-2389; sglang==0.5.23:srt/arg_groups/speculative_hook.py:1096-1102',
    observe: async (s) => messageOf(s.sim.log(), SPEC_V2_LINE),
    expected: {
      '0.5.4': ['Overlap scheduler is disabled because of using eagle3 and standalone speculative decoding.'],
      '0.5.9': [
        'Overlap scheduler is disabled when spec v2 is off or using unsupported speculative algorithm. ' +
          'You can set env SGLANG_ENABLE_SPEC_V2=True to enable the experimental overlap scheduler.',
      ],
      '0.5.12': ['Spec v2 is enabled by default for eagle/eagle3/standalone speculative decoding.'],
      '0.5.23': [],
    },
  },
  {
    name: "the target's Load weight end line and the KV pool line, numbers aside",
    source:
      'sglang==0.5.4:srt/model_executor/model_runner.py:934-940, mem_cache/memory_pool.py:453; sglang==0.5.9:…/model_runner.py:1040-1047; sglang==0.5.12:…:1553-1560; sglang==0.5.23:…:1372-1379, memory_pool.py:2087-2091',
    observe: async (s) =>
      [/\] (Load weight end\..*)$/, /\] (KV Cache is allocated\..*)$/].map((re) =>
        messageOf(s.sim.log(), re)[0]!.replace(/\b\d+(?:\.\d+)?\b/g, 'N'),
      ),
    expected: {
      '0.5.4': [
        'Load weight end. type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=N GB, mem usage=N GB.',
        'KV Cache is allocated. #tokens: N, K size: N GB, V size: N GB',
      ],
      '0.5.9': [
        'Load weight end. elapsed=N s, type=Qwen2ForCausalLM, dtype=torch.bfloat16, avail mem=N GB, mem usage=N GB.',
        'KV Cache is allocated. #tokens: N, K size: N GB, V size: N GB',
      ],
      '0.5.12': [
        'Load weight end. elapsed=N s, type=Qwen2ForCausalLM, avail mem=N GB, mem usage=N GB.',
        'KV Cache is allocated. #tokens: N, K size: N GB, V size: N GB',
      ],
      '0.5.23': [
        'Load weight end. elapsed=N s, type=Qwen2ForCausalLM, avail mem=N GB, mem usage=N GB.',
        'KV Cache is allocated. dtype: torch.bfloat16, #tokens: N, K size: N GB, V size: N GB',
      ],
    },
  },
  {
    name: 'the first cuda graph capture line',
    source:
      'sglang==0.5.4:srt/model_executor/model_runner.py:2055; sglang==0.5.12:…:2945; sglang==0.5.23:srt/model_executor/model_runner_components/cuda_graph_setup.py:758-762',
    observe: async (s) => messageOf(s.sim.log(), /\] (Capture .*graph begin\. .*?)(?:, )?avail mem=/)[0],
    expected: {
      '0.5.4': 'Capture cuda graph begin. This can take up to several minutes.',
      '0.5.9': 'Capture cuda graph begin. This can take up to several minutes.',
      '0.5.12': 'Capture cuda graph begin. This can take up to several minutes.',
      '0.5.23': 'Capture target verify CUDA graph begin. backend=full, num_tokens_per_req=4',
    },
  },
  {
    name: "aerie's log parser (src/sglang/log-phase.ts) reads each release's capture lines as the cuda graph phase",
    source: "the wording above; readPhase over the log up to the scheduler's max_total_num_tokens line",
    observe: async (s) => readPhase(s.sim.log().slice(0, s.sim.log().indexOf('max_total_num_tokens='))).phase,
    expected: {
      '0.5.4': 'capturing cuda graphs',
      '0.5.9': 'capturing cuda graphs',
      '0.5.12': 'capturing cuda graphs',
      '0.5.23': 'capturing cuda graphs',
    },
  },
  {
    name: 'the 48 cap and its wording',
    source:
      'sglang==0.5.4:srt/server_args.py:1290-1294; sglang==0.5.9:…:2362-2366; sglang==0.5.23:srt/arg_groups/speculative_hook.py:1086-1094',
    observe: async (s) => ({
      cap: (await s.get('/get_server_info')).body.max_running_requests,
      line: messageOf(s.sim.log(), /(Max running requests is reset to 48.*)$/),
    }),
    expected: {
      '0.5.4': { cap: 48, line: ['Max running requests is reset to 48 for speculative decoding.'] },
      '0.5.9': {
        cap: 48,
        line: [
          'Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.',
        ],
      },
      '0.5.12': {
        cap: 48,
        line: [
          'Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.',
        ],
      },
      '0.5.23': {
        cap: 48,
        line: [
          'Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.',
        ],
      },
    },
  },
  {
    name: 'auto speculative parameters for a Qwen2 target (S10)',
    source:
      'sglang==0.5.4:srt/server_args.py:3831-3833 (others 5/4/8); sglang==0.5.9:…:5773-5775 (others 3/1/4); sglang==0.5.23:srt/arg_groups/speculative_hook.py:1460-1462',
    observe: async (s) => {
      const b = (await s.get('/get_server_info')).body;
      return [b.speculative_num_steps, b.speculative_eagle_topk, b.speculative_num_draft_tokens];
    },
    expected: { '0.5.4': [5, 4, 8], '0.5.9': [3, 1, 4], '0.5.12': [3, 1, 4], '0.5.23': [3, 1, 4] },
  },
  {
    name: 'a /generate whose rid is in flight (S14)',
    source:
      'sglang==0.5.4:srt/managers/tokenizer_manager.py:865 and 0.5.9 :1071 (overwritten); sglang==0.5.12:…:2594-2595, sglang==0.5.23:…:3835-3836 (400)',
    observe: async (s) => {
      const abort = new AbortController();
      const first = await fetch(`${s.sim.baseUrl}/generate`, {
        method: 'POST',
        signal: abort.signal,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          text: 'a long one',
          rid: 'same-rid',
          stream: true,
          sampling_params: { max_new_tokens: 8000, ignore_eos: true },
        }),
      });
      await first.body!.getReader().read(); // in flight: its first chunk is out
      const second = await s.post('/generate', {
        text: 'again',
        rid: 'same-rid',
        sampling_params: { max_new_tokens: 1 },
      });
      abort.abort();
      return second.status === 200 ? 200 : second.body;
    },
    expected: {
      '0.5.4': 200,
      '0.5.9': 200,
      '0.5.12': { error: { message: 'Duplicate request ID detected: same-rid' } },
      '0.5.23': { error: { message: 'Duplicate request ID detected: same-rid' } },
    },
  },
  {
    name: 'a streamed chat over the context length: an error event in a 200 stream (0.5.4, 0.5.9) or a 400 ErrorResponse (0.5.12 on)',
    source:
      'sglang==0.5.4:srt/entrypoints/openai/serving_chat.py:434-445,657-662; sglang==0.5.12:…:779-801; sglang==0.5.23:…:2413-2435',
    observe: async (s) => {
      const r = await s.post('/v1/chat/completions', {
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 99999,
        stream: true,
      });
      return r.status === 200
        ? { status: 200, events: sse(r.text).map((e) => (e === '[DONE]' ? e : Object.keys(e.error))) }
        : { status: r.status, keys: Object.keys(r.body) };
    },
    expected: {
      '0.5.4': { status: 200, events: [['object', 'message', 'type', 'param', 'code'], '[DONE]'] },
      '0.5.9': { status: 200, events: [['object', 'message', 'type', 'param', 'code'], '[DONE]'] },
      '0.5.12': { status: 400, keys: ['object', 'message', 'type', 'param', 'code'] },
      '0.5.23': { status: 400, keys: ['object', 'message', 'type', 'param', 'code'] },
    },
  },
  {
    name: "an OpenAI route's error body is ErrorResponse in every release (S11)",
    source:
      'sglang==0.5.4:srt/entrypoints/openai/protocol.py:67-72, http_server.py:372-381; sglang==0.5.23:…/protocol.py:106-111',
    observe: async (s) => {
      const r = await s.post('/v1/chat/completions', {
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 99999,
      });
      return { status: r.status, object: r.body.object, type: r.body.type, param: r.body.param, code: r.body.code };
    },
    expected: {
      '0.5.4': { status: 400, object: 'error', type: 'BadRequestError', param: null, code: 400 },
      '0.5.9': { status: 400, object: 'error', type: 'BadRequestError', param: null, code: 400 },
      '0.5.12': { status: 400, object: 'error', type: 'BadRequestError', param: null, code: 400 },
      '0.5.23': { status: 400, object: 'error', type: 'BadRequestError', param: null, code: 400 },
    },
  },
  {
    name: "prompt_tokens counts the tokenizer's ids, BOS included, as bench_serving's prompt_len does (S4)",
    source: 'sglang==0.5.4:srt/managers/tokenizer_manager.py:554; sglang==0.5.4:bench_serving.py:1157-1160',
    observe: async (s) =>
      (await s.post('/generate', { text: 'count my tokens: naïve café', sampling_params: { max_new_tokens: 1 } })).body
        .meta_info.prompt_tokens,
    expected: Object.fromEntries(
      RELEASES.map((r) => [r, tok.encode('count my tokens: naïve café', true).length]),
    ) as Record<Release, unknown>,
  },
];

const running = new Map<Release, Running>();
const observed = new Map<string, unknown>();
let qwen: string;
let drafter: string;

function runningOf(sim: Sim): Running {
  let marks = 0;
  const call = async (p: string, body?: unknown) => {
    const r = await fetch(
      sim.baseUrl + p,
      body === undefined
        ? {}
        : { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) },
    );
    const text = await r.text();
    let json: any;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: r.status, body: json, text };
  };
  const post = (p: string, body: unknown) => call(p, body);
  return {
    sim,
    post,
    get: (p) => call(p),
    // A prefill of a length no other request has: once its line is in the log, so is every line before it.
    async settle() {
      marks++;
      const ids = Array.from({ length: 40 + marks }, (_, i) => 3000 + marks * 100 + i);
      await post('/generate', { input_ids: ids, sampling_params: { max_new_tokens: 0 } });
      await until('the marker prefill in the log', 10_000, () =>
        sim.log().includes(`#new-token: ${ids.length}, #cached-token: 0`) ? true : undefined,
      );
    },
  };
}

beforeAll(async () => {
  // The simulator target as a Qwen2 model: the same tokenizer, another architecture.
  qwen = await tempDir('aerie-sim-qwen2-');
  const cfg = JSON.parse(await fs.readFile(path.join(MODEL, 'config.json'), 'utf8')) as Record<string, unknown>;
  await fs.writeFile(
    path.join(qwen, 'config.json'),
    JSON.stringify({ ...cfg, architectures: ['Qwen2ForCausalLM'], model_type: 'qwen2' }),
  );
  for (const f of ['tokenizer.json', 'tokenizer_config.json'])
    await fs.copyFile(path.join(MODEL, f), path.join(qwen, f));
  drafter = await makeDrafter(2.5);
  const sims = await Promise.all(
    RELEASES.map((version) =>
      startSim(
        { SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION: 'false' },
        ['--model-path', qwen, '--speculative-algorithm', 'EAGLE3', '--speculative-draft-model-path', drafter],
        { version },
      ),
    ),
  );
  sims.forEach((s, i) => running.set(RELEASES[i], runningOf(s)));
  // Every check once per release, in table order (the warmup check reads the log before any other request).
  for (const c of CHECKS) for (const r of RELEASES) observed.set(`${c.name}@${r}`, await c.observe(running.get(r)!));
}, 120_000);

afterAll(async () => {
  await Promise.all([...running.values()].map((r) => stopSim(r.sim)));
  for (const d of [qwen, drafter]) if (d) await removeWorkdir(d);
});

const passes = (c: Check, sim: Release, judge: Release) =>
  JSON.stringify(observed.get(`${c.name}@${sim}`)) === JSON.stringify(c.expected[judge]);
const differ = (c: Check, a: Release, b: Release) => JSON.stringify(c.expected[a]) !== JSON.stringify(c.expected[b]);

describe.each(RELEASES)('aerie-sim sglang --version %s', (sim) => {
  it.each(CHECKS.map((c) => [c.name, c] as const))('passes its own check: %s', (_name, c) => {
    expect(observed.get(`${c.name}@${sim}`), c.source).toEqual(c.expected[sim]);
  });

  it("fails every other release's check where the two releases differ, and passes it where they agree", () => {
    const wrong: string[] = [];
    for (const judge of RELEASES) {
      if (judge === sim) continue;
      for (const c of CHECKS) if (passes(c, sim, judge) === differ(c, sim, judge)) wrong.push(`${judge}: ${c.name}`);
    }
    expect(wrong).toEqual([]);
  });
});

it('the table has checks where 0.5.4 and 0.5.23 differ, and 0.5.9 differs from both somewhere', () => {
  expect(CHECKS.filter((c) => differ(c, '0.5.4', '0.5.23')).length).toBeGreaterThanOrEqual(10);
  expect(CHECKS.some((c) => differ(c, '0.5.9', '0.5.4'))).toBe(true);
  expect(CHECKS.some((c) => differ(c, '0.5.9', '0.5.23'))).toBe(true);
});
