/**
 * The model-server lifecycle: launch → await ready → smoke test → (acceptance gate) → stop.
 * Every answer is checked against the process aerie launched (incidents 1, 2, 5).
 */
import { Context } from '@temporalio/activity';
import type { Host, ProcRecord } from '../hosts/host.js';
import { renderServerArgv, serverLaunchEnv, benchmarkReadyArgs, type ServerLaunchSpec } from '../sglang/launch-argv.js';
import { readPhase, classifyServerFailure, serverWarnings, lastLines } from '../sglang/log-phase.js';
import { SglangClient, acceptLengthOf } from '../sglang/client.js';
import { checkServerIdentity } from '../sglang/identity.js';
import { checkDrafterCompat } from '../sglang/drafter-check.js';
import { expandEnv, fatal, runPaths, transient, type ActivityDeps, type RunRef } from './context.js';

export type ServerRole = 'generate' | 'extract' | 'deploy' | 'baseline';

export interface ServerLaunch {
  role: ServerRole;
  launchId: string;
  host: string;
  port: number;
  pid: number;
  pgid: number;
  logPath: string;
  argv: string[];
  modelPath: string;
  speculative?: { algorithm: string; draftModelPath: string };
  reattached: boolean;
  /** Things the researcher should know about this launch (e.g. a flag aerie set). */
  notes: string[];
  record: ProcRecord;
}

interface ServerStep extends RunRef {
  launch: ServerLaunch;
}

const LOG_KEEP = 1 << 20;

/** Highest generation number among this run's launches of a role, and its record. */
export async function latestLaunch(host: Host, prefix: string): Promise<{ gen: number; record: ProcRecord } | null> {
  let best: { gen: number; record: ProcRecord } | null = null;
  for (const r of await host.listLaunches()) {
    if (!r.launchId.startsWith(prefix)) continue;
    const gen = Number(r.launchId.slice(prefix.length));
    if (Number.isInteger(gen) && (!best || gen > best.gen)) best = { gen, record: r };
  }
  return best;
}

/** Fails the current stage the moment our server process is gone, with its log tail. */
export async function deathReport(host: Host, launch: ServerLaunch, what: string): Promise<Error> {
  const tail = lastLines((await host.tailFrom(launch.logPath, 0).catch(() => ({ data: '' }))).data, 50);
  const status = await host.procStatus(launch.record);
  const failure = classifyServerFailure(tail);
  const code = status.state === 'exited' ? ` (exit code ${status.code})` : '';
  const message = `${launch.role} server pid ${launch.pid} ${what}${code}: ${failure.message}`;
  const details = { logTail: tail, kind: failure.kind, interpreter: failure.interpreter, logPath: launch.logPath };
  const type = {
    'missing-module': 'MissingDependencyError',
    'out-of-memory': 'OutOfMemoryError',
    'port-in-use': 'PortInUseError',
    'warmup-failed': 'ServerCrashed',
    crash: 'ServerCrashed',
  }[failure.kind];
  return failure.retryable ? transient(type, message, details) : fatal(type, message, details);
}

export function serverActivities({ hosts }: ActivityDeps) {
  return {
    async launchServer(input: RunRef & { role: ServerRole; drafterDir?: string; maxConcurrency?: number }): Promise<ServerLaunch> {
      const { config, runId, role } = input;
      const host = hosts.get(config);
      const paths = runPaths(host, runId);
      const prefix = `${runId}.server-${role}.`;
      const notes: string[] = [];

      const spec: ServerLaunchSpec = {
        launcher: config.server.launcher,
        modelPath: config.target['model-path'],
        port: config.server.port,
        tpSize: config.server['tp-size'],
        memFractionStatic: config.server['mem-fraction-static'],
        extraArgs: config.server['extra-args'],
        extraction: role === 'extract',
      };
      let speculative: ServerLaunch['speculative'];
      if (role === 'deploy') {
        const d = config.stages.deploy;
        const draft = input.drafterDir;
        if (!draft) throw fatal('ConfigError', 'deploy needs a drafter: the train stage output or stages.deploy.draft-model-path');
        const draftConfig = await readJson(host, `${draft}/config.json`);
        const refusal = checkDrafterCompat(d['speculative-algorithm'], draftConfig);
        if (refusal) throw fatal('DrafterRejectedError', refusal);
        spec.speculative = {
          algorithm: d['speculative-algorithm'],
          draftModelPath: draft,
          numSteps: d['num-steps'],
          eagleTopk: d['eagle-topk'],
          numDraftTokens: d['num-draft-tokens'],
        };
        spec.maxRunningRequests = d['max-running-requests'];
        if (input.maxConcurrency) {
          const ready = benchmarkReadyArgs(spec, input.maxConcurrency);
          Object.assign(spec, ready.spec);
          notes.push(...ready.notes);
        }
        speculative = { algorithm: d['speculative-algorithm'], draftModelPath: draft };
      }
      const argv = renderServerArgv(spec);

      // A live launch of this role from an earlier attempt is re-attached, never duplicated.
      const latest = await latestLaunch(host, prefix);
      if (latest && (await host.procStatus(latest.record)).state === 'alive') {
        return toLaunch(role, latest.record, true, notes, spec, speculative, config.server.port);
      }
      const holder = await host.portHolder(config.server.port);
      if (holder.listening) {
        const who = holder.pid ? `pid ${holder.pid}${holder.command ? ` (${holder.command})` : ''}` : 'an unknown process';
        throw fatal('PortInUseError', `port ${config.server.port} on ${host.name} is already held by ${who}; aerie did not start it and will not stop it. Free the port or set server.port`);
      }
      const env = serverLaunchEnv(
        expandEnv(config.server.env),
        role === 'extract' ? { dumpEnv: config.stages.extract['dump-env'], dumpDir: config.stages.extract['dump-dir'] } : undefined,
      );
      if (role === 'extract') await host.mkdirp(config.stages.extract['dump-dir']);
      await host.mkdirp(paths.logs);
      const gen = latest ? latest.gen + 1 : 0;
      const { record, reattached } = await host.spawnDetached(`${prefix}${gen}`, argv, {
        env,
        cwd: paths.root,
        logPath: `${paths.logs}/server-${role}-${gen}.log`,
      });
      return toLaunch(role, record, reattached, notes, spec, speculative, config.server.port);
    },

    async awaitServerReady(input: ServerStep): Promise<{ elapsedMs: number; phase: string; warnings: string[] }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const ctx = Context.current();
      const { endpoint, 'poll-interval': pollMs, budget } = config.server.readiness;
      const client = new SglangClient(await host.httpBase(launch.port), { timeoutMs: Math.max(5000, pollMs * 2) });
      const started = Date.now();
      let offset = 0;
      let log = '';
      let phase = 'starting';
      let lastHttp: number | null = null;
      for (;;) {
        const chunk = await host.tailFrom(launch.logPath, offset).catch(() => ({ data: '', offset }));
        offset = chunk.offset;
        log = (log + chunk.data).slice(-LOG_KEEP);
        phase = readPhase(log).phase;
        const status = await host.procStatus(launch.record);
        if (status.state !== 'alive') throw await deathReport(host, launch, `exited while ${phase}`);
        const health = await client.health(endpoint, ctx.cancellationSignal);
        lastHttp = health.status;
        const elapsedMs = Date.now() - started;
        ctx.heartbeat({ phase, elapsedMs, lastHttp, logOffset: offset });
        if (health.status === 200) {
          const info = await client.serverInfo(ctx.cancellationSignal);
          const problems = checkServerIdentity(info, {
            modelPath: launch.modelPath,
            port: launch.port,
            speculativeAlgorithm: launch.speculative?.algorithm,
            draftModelPath: launch.speculative?.draftModelPath,
          });
          if (problems.length > 0) {
            throw fatal('PortInUseError', `something answers on port ${launch.port} but it is not the server aerie launched: ${problems.join('; ')}`);
          }
          return { elapsedMs, phase: 'ready', warnings: serverWarnings(log) };
        }
        if (elapsedMs > budget) {
          throw fatal('ServerNotReady', `${launch.role} server not ready after ${Math.round(elapsedMs / 1000)} s (budget ${budget / 1000} s); last phase from its log: ${phase}; last HTTP status: ${lastHttp ?? 'no answer'}`, {
            logTail: lastLines(log, 50),
          });
        }
        await sleep(pollMs, ctx.cancellationSignal);
      }
    },

    async smokeTest(input: ServerStep): Promise<{ text: string; completionTokens: number }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const client = new SglangClient(await host.httpBase(launch.port), { timeoutMs: 5 * 60_000 });
      try {
        const r = await client.generate(
          { text: 'The capital of France is', sampling_params: { max_new_tokens: config.server.readiness['smoke-tokens'], temperature: 0 } },
          Context.current().cancellationSignal,
        );
        const tokens = r.meta_info?.completion_tokens ?? 0;
        if (!r.text || tokens <= 0) throw transient('ServerCrashed', `smoke generation returned no text (completion_tokens=${tokens})`);
        return { text: r.text, completionTokens: tokens };
      } catch (err) {
        if ((await host.procStatus(launch.record)).state !== 'alive') throw await deathReport(host, launch, 'died on its first generation');
        throw err;
      }
    },

    async acceptanceGate(input: ServerStep): Promise<{ acceptLength: number; perRequest: number[]; notes: string[] }> {
      const { config, launch } = input;
      const host = hosts.get(config);
      const d = config.stages.deploy;
      const client = new SglangClient(await host.httpBase(launch.port), { timeoutMs: 5 * 60_000 });
      const prompts = ['Explain how a hash map works.', 'Write a haiku about the sea.', 'List three uses of binary search.', 'Why is the sky blue?'];
      const perRequest: number[] = [];
      for (let i = 0; i < d['acceptance-requests']; i++) {
        const r = await client.generate({ text: prompts[i % prompts.length]!, sampling_params: { max_new_tokens: 64, temperature: 0 } });
        const a = r.meta_info ? acceptLengthOf(r.meta_info) : undefined;
        if (a === undefined) throw fatal('DrafterRejectedError', 'the server reports no speculative statistics (spec_verify_ct): is speculative decoding on?');
        perRequest.push(a);
        Context.current().heartbeat({ done: i + 1 });
      }
      const acceptLength = perRequest.reduce((a, b) => a + b, 0) / perRequest.length;
      if (acceptLength < d['acceptance-threshold']) {
        throw fatal(
          'DrafterRejectedError',
          `accept length ${acceptLength.toFixed(2)} is below ${d['acceptance-threshold']}: the drafter gives no real speedup. ` +
            `Likely causes: --speculative-algorithm EAGLE instead of EAGLE3 for an EAGLE-3 drafter, wrong eagle_aux_hidden_state_layer_ids, a missing d2t buffer, or an undertrained drafter`,
          { perRequest },
        );
      }
      return { acceptLength, perRequest, notes: launch.notes };
    },

    async stopServer(input: ServerStep): Promise<{ signals: string[]; groupEmpty: boolean; foreignGpuProcesses: number }> {
      const host = hosts.get(input.config);
      const result = await host.killGroup(input.launch.record, { graceMs: 15_000 });
      const gpus = await host.gpuInventory();
      return { ...result, foreignGpuProcesses: gpus.processes.filter((p) => !p.ours).length };
    },
  };
}

function toLaunch(
  role: ServerRole,
  record: ProcRecord,
  reattached: boolean,
  notes: string[],
  spec: ServerLaunchSpec,
  speculative: ServerLaunch['speculative'],
  port: number,
): ServerLaunch {
  return {
    role,
    launchId: record.launchId,
    host: record.host,
    port,
    pid: record.pid,
    pgid: record.pgid,
    logPath: record.logPath,
    argv: record.argv,
    modelPath: spec.modelPath,
    speculative,
    reattached,
    notes,
    record,
  };
}

async function readJson(host: Host, path: string): Promise<unknown> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch (err) {
    throw fatal('ConfigError', `cannot read ${path} on ${host.name}: ${(err as Error).message}`);
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(signal.reason);
    }, { once: true });
  });
}
