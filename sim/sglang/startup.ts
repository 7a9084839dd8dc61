/**
 * The startup sequence: SGLang's log lines in SGLang's order, with realistic durations
 * (scaled by AERIE_SIM_TIME_SCALE), the load-time faults, the draft model, then uvicorn binds
 * the port and the internal warmup request flips /health from 503 to 200.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { CaptureStart } from './capture-start.js';
import type { FaultGate } from './faults.js';
import { type ServerContext, WARMUP_HEADER } from './http.js';
import type { ModelConfig } from './model.js';
import { warmupInfoPath } from './profile.js';
import { type SimRelease, atLeast } from './release.js';
import { gpusFor, holdGpus } from '../gpu/registry.js';
import { CUDA_GRAPH_GIB, GPU_TOTAL_GIB } from './settings.js';
import {
  type PyError,
  draftConfigFrames,
  draftNotFound,
  loadAbortError,
  loadFrames,
  oomError,
  schedulerException,
} from './tracebacks.js';

/** Nominal durations in seconds at AERIE_SIM_TIME_SCALE=1 (8B target, local NVMe, one H100). */
export const PHASE_SECONDS = {
  initDistributed: 2,
  loadWeights: 30,
  memoryPool: 1,
  cudaGraph: 15,
  draftLoad: 3,
  draftCudaGraph: 8,
  draftExtendCudaGraph: 4,
  firstRequestCompile: 2,
};

export interface StartupDeps {
  ctx: ServerContext;
  faults: FaultGate;
  drafter: { cfg: ModelConfig | null; error: PyError | null };
  host: string;
  port: number;
  /** Print a traceback and end the process with exit code 1. */
  fail(text: string): void;
  /** Print text and end with exit code 1, without the sigquit notice (a scheduler dead before its try block). */
  die(text: string): void;
  capture: CaptureStart;
  /** Start listening; false when the port is taken (the process is then ending). */
  bind(): Promise<boolean>;
}

const gb = (v: number) => v.toFixed(2);

function cudaGraphBatchSizes(max: number): number[] {
  const all = [1, 2, 4, 8, 12];
  for (let b = 16; b <= 256; b += 8) all.push(b);
  return all.filter((b) => b <= max);
}

/**
 * "Load weight end." per release: 0.5.4 type and dtype (sglang==0.5.4:srt/model_executor/model_runner.py:934-940);
 * 0.5.9 the elapsed time first (sglang==0.5.9:…:1040-1047); from 0.5.12 no dtype unless quantized
 * (sglang==0.5.12:…:1553-1560; sglang==0.5.23:…:1372-1379).
 */
function loadEnd(release: SimRelease, elapsedS: number, type: string, availGiB: number, usageGiB: number): string {
  const elapsed = atLeast(release, '0.5.9') ? `elapsed=${elapsedS.toFixed(2)} s, ` : '';
  const dtype = atLeast(release, '0.5.12') ? '' : 'dtype=torch.bfloat16, ';
  return `Load weight end. ${elapsed}type=${type}, ${dtype}avail mem=${gb(availGiB)} GB, mem usage=${gb(usageGiB)} GB.`;
}

function clock(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  return `${String(Math.floor(s / 60)).padStart(2, '0')}:${String(s % 60).padStart(2, '0')}`;
}

/** The address the warmup request uses to reach this server. */
function selfHost(host: string): string {
  if (host === '0.0.0.0' || host === '') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}

/** Resolves when ready; stays pending forever under never-ready; calls fail() on a load fault. */
export async function runStartup(d: StartupDeps): Promise<void> {
  const { ctx, faults } = d;
  const { log, env, resolved: r, target } = ctx;
  const args = r.args;
  const tp = args.tp_size as number;
  const wait = (sec: number) => sleep(sec * 1000 * env.timeScale);
  const all = (msg: string) => log.infoAllRanks(tp, msg);
  const graphs = !args.disable_cuda_graph;
  const m = r.memory;

  log.info('Using default HuggingFace chat template with detected content format: string');
  const pluginDeath = d.capture.plugins();
  if (pluginDeath !== null) return d.die(pluginDeath);
  all('Init torch distributed begin.');
  await wait(PHASE_SECONDS.initDistributed);
  all('Init torch distributed ends. mem usage=0.55 GB');

  all(`Load weight begin. avail mem=${gb(m.availStart)} GB`);
  // Each rank holds GPU memory from here until the process ends (nvidia-smi shows it).
  const gpus = gpusFor(tp);
  const hold = (gib: number) => holdGpus(gpus, gib * 1024);
  hold(0.55);
  const loadSeconds = typeof target.sim.load_seconds === 'number' ? target.sim.load_seconds : PHASE_SECONDS.loadWeights;
  const shards = 4;
  const t0 = performance.now();
  log.raw(`Loading safetensors checkpoint shards:   0% Completed | 0/${shards} [00:00<?, ?it/s]`);
  for (let s = 1; s <= shards; s++) {
    await wait(loadSeconds / shards);
    if (s === 2 && faults.fire('exit-during-load'))
      return d.fail(schedulerException(log.stamp(0), loadFrames(), loadAbortError()));
    if (s === 3 && faults.fire('oom-during-load'))
      return d.fail(schedulerException(log.stamp(0), loadFrames(), oomError(0)));
    const el = (performance.now() - t0) / 1000;
    const rate = el > 0 ? s / el : 0;
    const pct = String(Math.round((100 * s) / shards)).padStart(3);
    log.raw(
      `Loading safetensors checkpoint shards: ${pct}% Completed | ${s}/${shards} [${clock(el)}<${clock(rate > 0 ? (shards - s) / rate : 0)}, ${rate.toFixed(2)}it/s]`,
    );
  }
  log.raw('');
  const weightsError = d.capture.weights();
  if (weightsError !== null) return d.fail(weightsError);
  ctx.capture = d.capture.writer;
  ctx.states = d.capture.states;
  all(
    loadEnd(
      env.release,
      (performance.now() - t0) / 1000,
      target.architectures[0] ?? 'LlamaForCausalLM',
      m.availAfterLoad,
      m.weights,
    ),
  );

  await wait(PHASE_SECONDS.memoryPool);
  // 0.5.23 names the dtype (sglang==0.5.23:srt/mem_cache/memory_pool.py:2087-2091); 0.5.4-0.5.12 do not (sglang==0.5.4:…:453, 0.5.12 :744).
  const dtype = atLeast(env.release, '0.5.23') ? 'dtype: torch.bfloat16, ' : '';
  all(
    `KV Cache is allocated. ${dtype}#tokens: ${r.maxTotalTokens}, K size: ${gb(m.kvGiB / 2)} GB, V size: ${gb(m.kvGiB / 2)} GB`,
  );
  all(`Memory pool end. avail mem=${gb(m.availAfterPool)} GB`);
  hold(GPU_TOTAL_GIB - m.availAfterPool);
  let avail = m.availAfterPool;
  const bsList = JSON.stringify(cudaGraphBatchSizes(r.cudaGraphMaxBs)).replace(/,/g, ', ');
  const modern = atLeast(env.release, '0.5.23');
  const capture = async (what: string, seconds: number, memGiB: number) => {
    const start = performance.now();
    const elapsed = () => ((performance.now() - start) / 1000).toFixed(2);
    if (modern) {
      // sglang==0.5.23:srt/model_executor/model_runner_components/cuda_graph_setup.py:758-791 (target),
      // srt/speculative/eagle_worker_v2.py:513-537,632-658 (draft decode, draft extend): one line from rank 0 for the drafts.
      const spec = r.spec;
      const [name, perReq] =
        what === 'cuda graph'
          ? [spec ? 'target verify' : 'target decode', spec ? spec.numDraftTokens : 1]
          : what === 'draft cuda graph'
            ? ['draft decode', spec?.topk ?? 1]
            : ['draft extend', spec?.numDraftTokens ?? 1];
      const draft = what !== 'cuda graph';
      const say = (m: string) => (draft ? log.info(m, 0) : all(m));
      say(
        `Capture ${name} CUDA graph begin. backend=full, num_tokens_per_req=${perReq}, ${draft ? `bs=${bsList}, ` : ''}avail mem=${gb(avail)} GB`,
      );
      await wait(seconds);
      avail -= memGiB;
      say(
        `Capture ${name} CUDA graph end. ${draft ? '' : `bs=${bsList}, `}elapsed=${elapsed()} s, mem usage=${gb(memGiB)} GB, avail mem=${gb(avail)} GB.`,
      );
      return;
    }
    // sglang==0.5.4:srt/model_executor/model_runner.py:2055-2071, cuda_graph_runner.py:257; 0.5.12 model_runner.py:2945-2965.
    all(`Capture ${what} begin. This can take up to several minutes. avail mem=${gb(avail)} GB`);
    if (what === 'cuda graph') log.info(`Capture cuda graph bs ${bsList}`, 0);
    await wait(seconds);
    avail -= memGiB;
    all(`Capture ${what} end. Time elapsed: ${elapsed()} s. mem usage=${gb(memGiB)} GB. avail mem=${gb(avail)} GB.`);
  };
  if (graphs) await capture('cuda graph', PHASE_SECONDS.cudaGraph, CUDA_GRAPH_GIB);

  if (r.algorithm === 'EAGLE' || r.algorithm === 'EAGLE3' || r.algorithm === 'STANDALONE') {
    const draftPath = (args.speculative_draft_model_path as string | null) ?? null;
    if (!d.drafter.cfg) {
      const error = d.drafter.error ? d.drafter.error.message : draftNotFound(draftPath);
      return d.fail(schedulerException(log.stamp(0), draftConfigFrames(), error));
    }
    const drafter = d.drafter.cfg;
    all(`Load weight begin. avail mem=${gb(avail)} GB`);
    const draftStart = performance.now();
    await wait(PHASE_SECONDS.draftLoad);
    const draftGiB = Math.max(0.01, (drafter.numLayers * 12 * drafter.hiddenSize ** 2 * 2) / 2 ** 30 / tp);
    avail -= draftGiB;
    all(
      loadEnd(
        env.release,
        (performance.now() - draftStart) / 1000,
        drafter.architectures[0] ?? 'LlamaForCausalLM',
        avail,
        draftGiB,
      ),
    );
    if (graphs) {
      await capture('draft cuda graph', PHASE_SECONDS.draftCudaGraph, 0.21);
      await capture('draft extend cuda graph', PHASE_SECONDS.draftExtendCudaGraph, 0.12);
    }
  }

  log.info(
    `max_total_num_tokens=${r.maxTotalTokens}, chunked_prefill_size=${args.chunked_prefill_size}, ` +
      `max_prefill_tokens=${args.max_prefill_tokens}, max_running_requests=${r.maxRunning}, ` +
      `context_len=${r.contextLen}, available_gpu_mem=${gb(avail)} GB`,
    0,
  );
  // A scheduler stuck in its first batch: the warmup request never returns.
  if (!faults.fire('never-ready')) ctx.engine.start();

  log.uvicorn(`Started server process [${process.pid}]`);
  log.uvicorn('Waiting for application startup.');
  log.uvicorn('Application startup complete.');
  if (!(await d.bind())) return;
  log.uvicorn(`Uvicorn running on http://${d.host}:${d.port} (Press CTRL+C to quit)`);

  if (!args.skip_server_warmup) await warmup(d);
  if (ctx.status !== 'starting') return;
  ctx.status = 'up';
  log.info('The server is fired up and ready to roll!');
}

async function warmup(d: StartupDeps): Promise<void> {
  const base = `http://${selfHost(d.host)}:${d.port}`;
  const headers = { [WARMUP_HEADER]: '1', 'content-type': 'application/json' };
  const info = await fetch(`${base}${warmupInfoPath(d.ctx.env.release)}`, { headers });
  await info.arrayBuffer();
  await sleep(PHASE_SECONDS.firstRequestCompile * 1000 * d.ctx.env.timeScale);
  const res = await fetch(`${base}/generate`, {
    method: 'POST',
    headers,
    body: JSON.stringify({
      text: 'The capital city of France is',
      sampling_params: { temperature: 0, max_new_tokens: 8 },
    }),
  });
  const text = await res.text();
  if (res.status !== 200) {
    d.ctx.log.error(`Initialization failed. warmup error: ${text}`);
    d.fail('');
  }
}
