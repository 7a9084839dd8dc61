/**
 * `aerie-sim vllm <flags>`: a vLLM-0.32.0-compatible OpenAI server, as one process. It reuses
 * the SGLang simulator's model (the target's config.json and tokenizer, the deterministic LM),
 * its scheduler and latency model (engine.ts, latency.ts), its OpenAI request mapping and its
 * fault switches; what is vLLM's own is here and beside it: the parser (args.ts), the log
 * (log.ts), the speculative config and the drafter's load rules (spec.ts), the tracebacks and
 * /metrics. Everything imitated is listed with its source in sim/README.md ("aerie-sim vllm").
 * This file is the process: its flags, its config, its end; beside it the start-up (startup.ts),
 * the HTTP routes (routes.ts, generate.ts) and the engine's death (death.ts).
 *
 * Resolves with the exit code: 2 for argparse errors, 1 for a refused config, a failed engine
 * start or a taken port, 0 after SIGTERM/SIGINT and (as real vLLM does) after the engine died
 * at run time, unless VLLM_KEEP_ALIVE_ON_ENGINE_DEATH=1 keeps the API server up.
 */
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Engine } from '../sglang/engine.js';
import { FaultGate } from '../sglang/faults.js';
import type { SpecShape } from '../sglang/latency.js';
import { SimLM } from '../sglang/lm.js';
import { SimLog } from '../sglang/log.js';
import { type ModelConfig, acceptPlan, kvBytesPerToken, readModelConfig, weightGiB } from '../sglang/model.js';
import { GPU_TOTAL_GIB, type SimEnv, SimEnvError, readSimEnv } from '../sglang/settings.js';
import { SimTokenizer } from '../sglang/tokenizer.js';
import type { Body } from './api.js';
import { ArgparseError, type Parsed, USAGE, type VllmArgs, optionOrder, parseVllmArgs, pyRepr } from './args.js';
import { VLLM_VERSION, type VllmServer } from './context.js';
import { dieBeforeDecode } from './death.js';
import { VllmLog } from './log.js';
import { type MetricsState, SpecCounters } from './metrics.js';
import { httpHandler } from './routes.js';
import { type SpecPlan, SpecValidationError, resolveSpec } from './spec.js';
import { portFree, runStartup } from './startup.js';
import { DEPRECATION, MISSING_MODULE, bindTraceback, validationTraceback } from './tracebacks.js';

export { VLLM_VERSION };

/** max_num_seqs when unset, for an H100-class GPU (vllm==0.32.0:vllm/engine/arg_utils.py:2933-2941). */
const DEFAULT_MAX_NUM_SEQS = 1024;
/** max_num_batched_tokens of the API server on a GPU (vllm==0.32.0:vllm/engine/arg_utils.py:2895-2985). */
const MAX_BATCHED_TOKENS = 8192;
/** The largest CUDA-graph batch size captured by default (vllm==0.32.0:vllm/config/compilation.py). */
const GRAPH_MAX_BS = 512;

interface Prepared {
  env: SimEnv;
  faults: FaultGate;
  parsed: Parsed;
}

function prepare(argv: string[]): Prepared | number {
  let env: SimEnv;
  try {
    env = readSimEnv(process.env);
  } catch (e) {
    if (e instanceof SimEnvError) {
      process.stderr.write(`aerie-sim: ${e.message}\n`);
      return 2;
    }
    throw e;
  }
  const faults = new FaultGate(env);
  if (faults.fire('missing-module')) {
    process.stderr.write(MISSING_MODULE + '\n');
    return 1;
  }
  // The module warns at import, before its parser runs (serve.log's first lines).
  process.stderr.write(DEPRECATION + '\n');
  try {
    const parsed = parseVllmArgs(argv);
    if (parsed.help) {
      process.stdout.write(USAGE);
      return 0;
    }
    return { env, faults, parsed };
  } catch (e) {
    if (e instanceof ArgparseError) {
      process.stderr.write(e.stderr);
      return 2;
    }
    throw e;
  }
}

export async function runVllm(argv: string[]): Promise<number> {
  const prep = prepare(argv);
  if (typeof prep === 'number') return prep;
  const { env, faults, parsed } = prep;
  const a: VllmArgs = parsed.args;
  const log = new VllmLog({ accessLog: !a.disable_uvicorn_access_log });
  const wait = (sec: number) => sleep(sec * 1000 * env.timeScale);
  const keepAlive = process.env.VLLM_KEEP_ALIVE_ON_ENGINE_DEATH === '1';

  // entrypoints/serve/utils/api_utils.py:325-347 (banner), :286 (non-default args).
  const banner = [
    '',
    '       █     █     █▄   ▄█',
    ` ▄▄ ▄█ █     █     █ ▀▄▀ █  version ${VLLM_VERSION}`,
    `  █▄█▀ █     █     █     █  model   ${a.model}`,
    '   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀',
    '',
  ];
  for (const l of banner) log.info('APIServer', 'api_utils.py:347', l);
  const nonDefault = [...parsed.given.entries()].sort(([x], [y]) => optionOrder(x) - optionOrder(y));
  log.info(
    'APIServer',
    'api_utils.py:286',
    `non-default args: {${nonDefault.map(([k, v]) => `'${k}': ${pyRepr(v)}`).join(', ')}}`,
  );

  const host = a.host ?? undefined;
  if (!(await portFree(a.port, host))) {
    log.raw(bindTraceback(a.host ?? '', a.port));
    return 1;
  }

  let target: ModelConfig;
  try {
    target = readModelConfig(path.resolve(a.model));
  } catch {
    log.raw(
      validationTraceback(
        `  Value error, Invalid repository ID or local directory specified: '${a.model}'.\nPlease verify the following requirements:\n1. Provide a valid Hugging Face repository ID.\n2. Specify a local directory that contains a recognized configuration file.`,
      ).replace('for SpeculativeConfig', 'for ModelConfig'),
    );
    return 1;
  }
  const maxModelLen = a.max_model_len && a.max_model_len > 0 ? a.max_model_len : target.maxPositionEmbeddings;
  log.info('APIServer', 'model.py:733', `Resolved architecture: ${target.architectures[0] ?? 'LlamaForCausalLM'}`);
  log.info('APIServer', 'model.py:2152', `Using max model len ${maxModelLen}`);

  let plan: SpecPlan | null = null;
  if (a.speculative_config) {
    try {
      plan = resolveSpec(a.speculative_config as Body, target);
    } catch (e) {
      if (!(e instanceof SpecValidationError)) throw e;
      if (e.drafter) {
        log.info(
          'APIServer',
          'model.py:733',
          `Resolved architecture: ${e.drafter.architectures[0] ?? 'LlamaForCausalLM'}`,
        );
        log.info('APIServer', 'model.py:2152', `Using max model len ${e.drafter.maxPositionEmbeddings}`);
      }
      log.raw(validationTraceback(e.message));
      return 1;
    }
    log.info('APIServer', 'model.py:733', `Resolved architecture: ${plan.drafter.architectures[0] ?? plan.arch}`);
    log.info('APIServer', 'model.py:2152', `Using max model len ${plan.drafter.maxPositionEmbeddings}`);
    if (plan.drafter.maxPositionEmbeddings !== maxModelLen)
      log.info(
        'APIServer',
        'speculative.py:1669',
        `Overriding draft model max model len from ${plan.drafter.maxPositionEmbeddings} to ${maxModelLen}`,
      );
  }
  if (a.enforce_eager)
    log.warning(
      'APIServer',
      'vllm.py:1703',
      'Enforce eager set, disabling torch.compile, CUDAGraphs, and JIT kernel warmup. This is equivalent to setting -cc.mode=none -cc.cudagraph_mode=none and --kernel_config.enable_jit_warmup=False',
    );

  // From here the process lives until its end: the exit code comes through `exited`.
  let finish!: (code: number) => void;
  const exited = new Promise<number>((r) => (finish = r));
  const end = (code: number) => {
    if (srv.ended) return;
    srv.ended = true;
    finish(code);
  };

  const k = plan?.numTokens ?? 0;
  const spec: SpecShape | null = plan ? { numSteps: k, topk: 1, numDraftTokens: k + 1 } : null;
  const accept = plan ? acceptPlan(plan.method === 'eagle3' ? 'EAGLE3' : 'EAGLE', plan.drafter, k, k + 1) : null;
  const tp = a.tensor_parallel_size;
  const weights = weightGiB(target, tp);
  const kvGiB = Math.max(0.5, GPU_TOTAL_GIB * a.gpu_memory_utilization - weights - 1.5);
  const kvTokens = Math.floor((kvGiB * 2 ** 30) / kvBytesPerToken(target, tp));
  const servedNames = a.served_model_name && a.served_model_name.length > 0 ? a.served_model_name : [a.model];
  const metrics: MetricsState = {
    modelName: servedNames[0]!,
    createdAt: Date.now() / 1000,
    spec: plan ? new SpecCounters(k) : null,
    running: 0,
    waiting: 0,
    promptTokens: 0,
    generationTokens: 0,
    success: { stop: 0, length: 0, abort: 0, error: 0, repetition: 0 },
  };
  const startTimeS = Date.now() / 1000;
  const fingerprint = `vllm-${VLLM_VERSION}-${randomBytes(4).toString('hex')}`;

  let deadResolve!: () => void;
  const deadPromise = new Promise<void>((r) => (deadResolve = r));

  const lm = new SimLM(SimTokenizer.forModel(target.path));
  const quiet = new SimLog('critical', 'critical', { out: () => undefined, err: () => undefined });
  const engine: Engine = new Engine({
    log: quiet,
    lm,
    spec,
    accept,
    maxRunning: a.max_num_seqs ?? DEFAULT_MAX_NUM_SEQS,
    maxPrefillTokens: MAX_BATCHED_TOKENS,
    maxTotalTokens: Math.max(kvTokens, 1),
    cudaGraphMaxBs: GRAPH_MAX_BS,
    disableCudaGraph: a.enforce_eager,
    disableRadixCache: false,
    decodeLogInterval: Number.MAX_SAFE_INTEGER,
    decodeScale: env.decodeScale,
    prefillScale: env.prefillScale,
    eosTokenId: target.eosTokenId,
    beforeRealDecode: () => dieBeforeDecode(srv),
  });

  const shutdown = (why: 'signal' | 'engine-dead') => {
    if (srv.status === 'shutting-down') return;
    const wasUp = srv.server !== null;
    srv.status = 'shutting-down';
    engine.halt();
    if (why === 'signal') {
      log.info('EngineCore', 'core.py:1454', '[shutdown] EngineCore: trigger received signal=SIGTERM');
      log.info('APIServer', 'launcher.py:254', '[shutdown] API server: shutdown triggered');
    }
    if (wasUp) {
      srv.server?.close();
      srv.server?.closeAllConnections();
      log.uvicorn('Shutting down');
      log.uvicorn('Waiting for application shutdown.');
      log.uvicorn('Application shutdown complete.');
      log.uvicorn(`Finished server process [${process.pid}]`);
    }
    log.info('APIServer', 'core_client.py:770', '[shutdown] MPClient: start timeout=0s');
    log.info('APIServer', 'core_client.py:777', '[shutdown] MPClient: complete');
    end(0);
  };

  const srv: VllmServer = {
    a,
    env,
    faults,
    log,
    host,
    target,
    maxModelLen,
    plan,
    k,
    tp,
    weights,
    kvTokens,
    servedNames,
    metrics,
    startTimeS,
    fingerprint,
    keepAlive,
    lm,
    engine,
    wait,
    end,
    ended: false,
    status: 'starting',
    deadResolve,
    deadPromise,
    server: null,
    lastPrompt: 1,
    shutdown,
  };
  process.once('SIGTERM', () => shutdown('signal'));
  process.once('SIGINT', () => shutdown('signal'));
  runStartup(srv, httpHandler(srv)).catch((e: unknown) => {
    log.raw(
      `Traceback (most recent call last):\n  File "vllm/entrypoints/openai/api_server.py", line 59, in <module>\nRuntimeError: ${(e as Error).message}`,
    );
    end(1);
  });
  return exited;
}
