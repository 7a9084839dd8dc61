/**
 * `aerie-sim sglang <flags>`: the SGLang-compatible simulated server, as one process.
 * Resolves with the process exit code: 2 for argparse errors, 1 for tracebacks, faults and
 * a taken port, 0 after SIGTERM/SIGINT.
 */
import type http from 'node:http';
import path from 'node:path';
import { handleGenerate } from './api-native.js';
import { handleChat, handleCompletion, handleDetokenize, handleTokenize } from './api-openai.js';
import { ArgparseError, type Parsed, parseLaunchArgs, serverArgsRepr, usageLine, warningLine } from './args.js';
import { captureStart } from './capture-start.js';
import { Engine } from './engine.js';
import { FaultGate } from './faults.js';
import { type ServerContext, createHttpServer } from './http.js';
import { SimLM } from './lm.js';
import { SimLog } from './log.js';
import { type ModelConfig, acceptPlan, hasConfig, readModelConfig } from './model.js';
import { type Resolved, type SimEnv, SimEnvError, readSimEnv, resolveServerArgs } from './settings.js';
import { runStartup } from './startup.js';
import { SimReleaseError, pickRelease } from './release.js';
import { SimTokenizer } from './tokenizer.js';
import {
  FIRST_DECODE_ERROR,
  MISSING_MODULE,
  PyError,
  bindError,
  firstDecodeFrames,
  schedulerException,
} from './tracebacks.js';

function listen(server: http.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (e: Error) => reject(e);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

function readDrafter(draftPath: string | null): { cfg: ModelConfig | null; error: PyError | null } {
  if (!draftPath || !hasConfig(draftPath)) return { cfg: null, error: null };
  try {
    return { cfg: readModelConfig(draftPath), error: null };
  } catch (e) {
    if (e instanceof PyError) return { cfg: null, error: e };
    throw e;
  }
}

interface Prepared {
  env: SimEnv;
  faults: FaultGate;
  parsed: Parsed;
  target: ModelConfig;
  resolved: Resolved;
}

/** Everything before the first log line: env, argparse, config.json, ServerArgs post-init. */
function prepare(rawArgv: string[]): (Prepared & { argv: string[] }) | number {
  let env: SimEnv;
  let argv: string[];
  try {
    const picked = pickRelease(rawArgv, process.env);
    argv = picked.rest;
    env = readSimEnv(process.env, picked.release);
  } catch (e) {
    if (e instanceof SimEnvError || e instanceof SimReleaseError) {
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
  let parsed: Parsed;
  try {
    parsed = parseLaunchArgs(argv, env.release);
  } catch (e) {
    // The release's argparse error (its prog, deprecation notes of flags taken before it first), exit 2.
    if (e instanceof ArgparseError) {
      process.stderr.write(e.stderr);
      return 2;
    }
    // 0.5.4's retired flags raise ValueError from their action: a traceback, exit 1.
    if (e instanceof PyError) {
      process.stderr.write(e.traceback + '\n');
      return e.exitCode;
    }
    throw e;
  }
  if (parsed.help) {
    process.stdout.write(usageLine(env.release) + '\n');
    return 0;
  }
  // Deprecated flags print their note while argparse takes them, before any log line.
  for (const w of parsed.warnings) process.stderr.write(`${warningLine(env.release, w)}\n`);
  try {
    const target = readModelConfig(path.resolve(parsed.args.model_path as string));
    return { env, faults, parsed, target, resolved: resolveServerArgs(parsed, target, env), argv };
  } catch (e) {
    if (e instanceof PyError) {
      process.stderr.write(e.traceback + '\n');
      return e.exitCode;
    }
    throw e;
  }
}

export async function runSglang(rawArgv: string[]): Promise<number> {
  const prep = prepare(rawArgv);
  if (typeof prep === 'number') return prep;
  const { env, faults, target, resolved, argv } = prep;
  const args = resolved.args;
  const log = new SimLog(args.log_level as string, args.log_level_http as string | null);
  log.info(`server_args=${serverArgsRepr(args)}`);
  for (const w of resolved.warnings) log.warning(w);

  const draftPath = args.speculative_draft_model_path as string | null;
  const drafter = readDrafter(draftPath ? path.resolve(draftPath) : null);
  const spec = resolved.spec;
  const accept =
    resolved.algorithm && spec ? acceptPlan(resolved.algorithm, drafter.cfg, spec.numSteps, spec.numDraftTokens) : null;

  let finish!: (code: number) => void;
  const exited = new Promise<number>((r) => (finish = r));
  let ended = false;
  const end = (code: number) => {
    if (ended) return;
    ended = true;
    finish(code);
  };
  /** A scheduler subprocess died: its traceback, the launcher's notice, exit 1. */
  const fail = (text: string) => {
    if (text) log.raw(text);
    log.error('Received sigquit from a child process. It usually means the child failed.');
    ctx.engine.halt();
    end(1);
  };

  const lm = new SimLM(SimTokenizer.forModel(target.path));
  const capture = captureStart({ log, env, procEnv: process.env, argv, target, resolved, lm });
  const engine = new Engine({
    log,
    lm,
    spec,
    accept,
    maxRunning: resolved.maxRunning,
    maxPrefillTokens: args.max_prefill_tokens as number,
    maxTotalTokens: resolved.maxTotalTokens,
    cudaGraphMaxBs: resolved.cudaGraphMaxBs,
    disableCudaGraph: Boolean(args.disable_cuda_graph),
    disableRadixCache: Boolean(args.disable_radix_cache),
    decodeLogInterval: args.decode_log_interval as number,
    decodeScale: env.decodeScale,
    prefillScale: env.prefillScale,
    eosTokenId: target.eosTokenId,
    beforeRealDecode: () => {
      if (!faults.fire('crash-first-decode')) return false;
      fail(schedulerException(log.stamp(0), firstDecodeFrames(), FIRST_DECODE_ERROR, 'scheduler.event_loop_overlap()'));
      return true;
    },
  });
  const ctx: ServerContext = {
    log,
    env,
    target,
    resolved,
    accept,
    engine,
    lm,
    capture: null,
    states: null,
    status: 'starting',
    startedAtSec: Math.floor(Date.now() / 1000),
  };
  let listening: http.Server | null = null;
  const shutdown = () => {
    ctx.status = 'shutting-down';
    log.uvicorn('Shutting down');
    engine.halt();
    listening?.close();
    listening?.closeAllConnections();
    log.uvicorn('Waiting for application shutdown.');
    log.uvicorn('Application shutdown complete.');
    log.uvicorn(`Finished server process [${process.pid}]`);
    end(0);
  };
  process.once('SIGTERM', shutdown);
  process.once('SIGINT', shutdown);

  const server = createHttpServer(ctx, {
    '/generate': { methods: ['POST', 'PUT'], handler: handleGenerate },
    '/v1/chat/completions': { methods: ['POST'], handler: handleChat },
    '/v1/completions': { methods: ['POST'], handler: handleCompletion },
    '/tokenize': { methods: ['POST'], handler: handleTokenize },
    '/v1/tokenize': { methods: ['POST'], handler: handleTokenize },
    '/detokenize': { methods: ['POST'], handler: handleDetokenize },
    '/v1/detokenize': { methods: ['POST'], handler: handleDetokenize },
  });
  const host = args.host as string;
  const port = args.port as number;
  // Like uvicorn, bound only after the model has loaded: during the load nothing listens on the
  // port (connections are refused), and a taken port fails only then, minutes into the launch.
  const bind = async (): Promise<boolean> => {
    try {
      await listen(server, port, host);
      listening = server;
      return true;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      log.raw(`${log.stamp()} ${bindError(host, port)}`);
      ctx.engine.halt();
      end(1);
      return false;
    }
  };
  if (ended) return exited;

  /** The scheduler died before its try block: no sigquit notice, the launcher's own error. */
  const die = (text: string) => {
    log.raw(text);
    ctx.engine.halt();
    end(1);
  };
  runStartup({ ctx, faults, drafter, host, port, fail, die, bind, capture }).catch((e: unknown) => {
    log.raw(
      `Traceback (most recent call last):\n  File "sglang/launch_server.py", line 24, in <module>\nRuntimeError: ${(e as Error).message}`,
    );
    end(1);
  });
  return exited;
}
