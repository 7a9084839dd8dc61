/**
 * The start-up of `aerie-sim vllm` as vLLM 0.32.0 logs it: the port bound before any engine starts,
 * the engine's config, the weights and drafter loaded shard by shard (with the faults that end it
 * there), the KV cache, CUDA-graph capture, the routes, then the port listening.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { gpusFor, holdGpus } from '../gpu/registry.js';
import { GPU_TOTAL_GIB } from '../sglang/settings.js';
import { PHASE_SECONDS } from '../sglang/startup.js';
import type { Body } from './api.js';
import { VLLM_VERSION, type VllmServer } from './context.js';
import { ROUTES } from './routes.js';
import { bindTraceback, engineStartFailure } from './tracebacks.js';

function listen(server: http.Server, port: number, host: string | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** create_server_socket binds the port before any engine starts (vllm==0.32.0:vllm/entrypoints/launchers/launcher.py:335-349, 394-398). */
export async function portFree(port: number, host: string | undefined): Promise<boolean> {
  const probe = http.createServer();
  try {
    await listen(probe, port, host);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EADDRINUSE') return false;
    throw e;
  }
  await new Promise<void>((r) => probe.close(() => r()));
  return true;
}

const gib = (v: number) => v.toFixed(2);

export async function runStartup(
  srv: VllmServer,
  handle: (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>,
): Promise<void> {
  const {
    a,
    end,
    engine,
    env,
    faults,
    host,
    k,
    kvTokens,
    log,
    maxModelLen,
    plan,
    servedNames,
    target,
    tp,
    wait,
    weights,
  } = srv;
  await wait(PHASE_SECONDS.initDistributed);
  if (srv.ended) return;
  const specRepr = plan
    ? `SpeculativeConfig(method='${plan.method}', model='${(a.speculative_config as Body).model as string}', num_spec_tokens=${k})`
    : 'None';
  log.info(
    'EngineCore',
    'core.py:133',
    `Initializing a V1 LLM engine (v${VLLM_VERSION}) with config: model='${a.model}', speculative_config=${specRepr}, tokenizer='${a.model}', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=${maxModelLen}, download_dir=None, load_format=auto, tensor_parallel_size=${tp}, pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, quantization=None, enforce_eager=${a.enforce_eager ? 'True' : 'False'}, seed=${a.seed}, served_model_name=${servedNames[0]}, enable_prefix_caching=True`,
  );
  log.info('Worker', 'gpu_model_runner.py:5040', `Starting to load model ${a.model}...`);
  const gpus = gpusFor(tp);
  holdGpus(gpus, 0.55 * 1024);
  const loadSeconds = typeof target.sim.load_seconds === 'number' ? target.sim.load_seconds : PHASE_SECONDS.loadWeights;
  const shards = 4;
  const t0 = performance.now();
  log.raw(`Loading safetensors checkpoint shards:   0% Completed | 0/${shards} [00:00<?, ?it/s]`);
  for (let s = 1; s <= shards; s++) {
    await wait(loadSeconds / shards);
    if (srv.ended) return;
    if (s === 2 && faults.fire('exit-during-load')) {
      engineStartFailure(
        log,
        'weights',
        'safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer',
      );
      return end(1);
    }
    if (s === 3 && faults.fire('oom-during-load')) {
      engineStartFailure(
        log,
        'weights',
        'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.',
      );
      return end(1);
    }
    const el = (performance.now() - t0) / 1000;
    log.raw(
      `Loading safetensors checkpoint shards: ${String(Math.round((100 * s) / shards)).padStart(3)}% Completed | ${s}/${shards} [00:${String(Math.round(el)).padStart(2, '0')}<00:00, ${(s / Math.max(el, 1e-3)).toFixed(2)}it/s]`,
    );
  }
  log.raw('');
  const loadS = (performance.now() - t0) / 1000;
  log.info('Worker', 'default_loader.py:501', `Loading weights took ${loadS.toFixed(2)} seconds`);
  log.info(
    'Worker',
    'gpu_model_runner.py:5150',
    `Model loading took ${gib(weights)} GiB memory and ${loadS.toFixed(6)} seconds`,
  );
  holdGpus(gpus, (weights + 0.55) * 1024);
  if (plan) {
    log.info('Worker', 'gpu_model_runner.py:5071', 'Loading drafter model...');
    const d0 = performance.now();
    await wait(PHASE_SECONDS.draftLoad);
    if (srv.ended) return;
    log.raw('Loading safetensors checkpoint shards:   0% Completed | 0/1 [00:00<?, ?it/s]');
    log.raw('Loading safetensors checkpoint shards: 100% Completed | 1/1 [00:00<00:00, 98.34it/s]');
    log.raw('');
    if (plan.loadError) {
      engineStartFailure(log, 'drafter', `ValueError: ${plan.loadError}`);
      return end(1);
    }
    log.info(
      'Worker',
      'default_loader.py:501',
      `Loading weights took ${((performance.now() - d0) / 1000).toFixed(2)} seconds`,
    );
    if (!plan.tensorNames.some((n) => n.endsWith('embed_tokens.weight')))
      log.info(
        'Worker',
        'llm_base_proposer.py:1440',
        'Detected EAGLE model without its own embed_tokens in the checkpoint. Sharing target model embedding weights with the draft model.',
      );
  }
  const kvStart = performance.now();
  log.info(
    'EngineCore',
    'kv_cache_utils.py:2327',
    `GPU KV cache size: ${kvTokens.toLocaleString('en-US')} tokens, Maximum concurrency for ${maxModelLen} tokens per request: ${(kvTokens / maxModelLen).toFixed(2)}x`,
  );
  holdGpus(gpus, GPU_TOTAL_GIB * a.gpu_memory_utilization * 1024);
  // An engine stuck in its start-up (a hung collective): nothing more is logged, the port never listens.
  if (faults.fire('never-ready')) return;
  if (!a.enforce_eager) {
    await wait(PHASE_SECONDS.cudaGraph);
    if (srv.ended) return;
    log.info(
      'Worker',
      'gpu_model_runner.py:6582',
      `Graph capturing finished in ${Math.round(PHASE_SECONDS.cudaGraph * env.timeScale)} secs, took 0.54 GiB`,
    );
  }
  log.info(
    'EngineCore',
    'core.py:402',
    `init engine (profile, create kv cache, warmup model) took ${((performance.now() - kvStart) / 1000).toFixed(2)} s`,
  );
  log.info('APIServer', 'entry.py:136', "Supported tasks: ['generate']");
  log.info('APIServer', 'entry.py:140', `Starting vLLM server on http://${a.host ?? '0.0.0.0'}:${a.port}`);
  log.info('APIServer', 'launcher.py:186', 'Available routes are:');
  for (const [p, m] of ROUTES) log.info('APIServer', 'launcher.py:195', `Route: ${p}, Methods: ${m}`);
  log.uvicorn(`Started server process [${process.pid}]`);
  log.uvicorn('Waiting for application startup.');
  log.uvicorn('Application startup complete.');
  engine.start();
  const s = http.createServer((req, res) => void handle(req, res));
  try {
    await listen(s, a.port, host);
  } catch (e) {
    log.raw(bindTraceback(a.host ?? '', a.port) + `\n${(e as Error).message}`);
    return end(1);
  }
  srv.server = s;
  if (srv.status === 'starting') srv.status = 'up';
}
