/**
 * launchServer: the one activity that starts a model server. The line is rendered for the
 * run's SGLang release and the role (the capture rides on an extraction launch, the drafter on
 * a deploy launch), judged before anything starts, and an earlier attempt's live launch is
 * re-attached rather than duplicated. What it finds on the port and in the launch records is
 * read through server-launches.ts and server-watch.ts.
 */
import { withRunGpus } from '../config/gpus.js';
import { ApplicationFailure } from '@temporalio/activity';
import type { ProcRecord } from '../hosts/host.js';
import { latestGeneration, AeriePyError } from '../stages/common/index.js';
import { launchRelease, readJson, sameArgv, startedButUnrecorded, type SglangRelease } from './server-launches.js';
import {
  renderServerArgv,
  releaseNotes,
  serverLaunchEnv,
  benchmarkReadyArgs,
  type ServerLaunchSpec,
} from '../sglang/launch-argv.js';
import { baseServerSpec } from '../stages/launch-specs.js';
import {
  captureLaunchFixes,
  CaptureSetupError,
  resolveCapture,
  type ResolvedCapture,
} from '../stages/extract/index.js';
import { checkDrafterCompat } from '../sglang/drafter-check.js';
import { engineOf, renderVllmArgv, vllmBenchmarkArgs, vllmLaunchEnv } from '../engines/index.js';
import { vllmDrafterCheck } from './server-drafter.js';
import { expandEnv, fatal, runPaths, type ActivityDeps, type RunRef } from './context.js';
import type { ServerLaunch, ServerRole } from './server-types.js';
import { describeHolder, portHolderOf } from './server-watch.js';

export function serverStartActivities({ hosts }: ActivityDeps) {
  return {
    async launchServer(
      input: RunRef & {
        role: ServerRole;
        drafterDir?: string;
        maxConcurrency?: number;
        extractPass?: 'aux' | 'final';
        sglang?: SglangRelease;
        /** One server of several with this role (a generate pool's `s<n>`): launch ids and logs of its own. */
        slot?: string;
      },
    ): Promise<ServerLaunch> {
      const { config, runId, role } = input;
      const host = hosts.get(config);
      const paths = runPaths(host, runId);
      // A pool's servers each have their own slot: one must never re-attach to, or stop, another's launch.
      const name = input.slot ? `${role}-${input.slot}` : role;
      const prefix = `${runId}.server-${name}.`;
      const notes: string[] = [];
      const extract = config.stages.extract;
      if (role === 'extract' && extract.driver === 'specforge-offline') {
        throw fatal(
          'ConfigError',
          `the ${extract.driver} extract driver starts its own engine; aerie launches no extraction server for it`,
        );
      }

      const spec: ServerLaunchSpec = baseServerSpec(config, role);
      const vllm = engineOf(config) === 'vllm';
      if (vllm && role === 'extract')
        throw fatal(
          'ConfigError',
          `stages.extract.driver ${extract.driver} needs an SGLang extraction server, and server.engine is vllm: use driver transformers`,
        );
      // SGLang's launch is rendered for the host's release; vLLM's for the one release aerie has read (0.32.0).
      const release = vllm
        ? { version: undefined, how: 'server.engine vllm: the release is read from the ready server' }
        : await launchRelease(
            host,
            config,
            role === 'deploy' ? config.stages.deploy['speculative-algorithm'] : undefined,
            input.sglang,
          );
      if ('problem' in release) throw fatal('ConfigError', release.problem);
      spec.sglangVersion = release.version;
      // aerie's capture rides on the extraction launch: its package on PYTHONPATH, its flags on the line.
      let capture: ResolvedCapture | undefined;
      if (role === 'extract') {
        const mode =
          extract.driver === 'stock-server' ? (input.extractPass === 'final' ? 'stock-final' : 'stock-aux') : 'plugin';
        try {
          capture = await resolveCapture(host, config, runId, paths.hidden, mode, release as SglangRelease);
        } catch (err) {
          if (err instanceof CaptureSetupError || err instanceof AeriePyError) throw fatal('ConfigError', err.message);
          throw err;
        }
        spec.capture = capture.spec;
        notes.push(...capture.notes);
      }
      let speculative: ServerLaunch['speculative'];
      if (role === 'deploy') {
        const d = config.stages.deploy;
        const draft = input.drafterDir;
        if (!draft)
          throw fatal(
            'ConfigError',
            'deploy needs a drafter: the train stage output or stages.deploy.draft-model-path',
          );
        const draftConfig = await readJson(host, `${draft}/config.json`);
        const refusal = checkDrafterCompat(d['speculative-algorithm'], draftConfig);
        if (vllm) {
          // vLLM's loader rules (engines/vllm/drafter.ts): each of these fails the load or the first decode.
          const problems = await vllmDrafterCheck(host, config, draft, draftConfig);
          if (problems.length > 0)
            throw fatal('DrafterRejectedError', `vLLM cannot serve this drafter: ${problems.join('; ')}`);
        }
        if (refusal && !d['allow-algorithm-mismatch']) throw fatal('DrafterRejectedError', refusal);
        if (refusal)
          notes.push(
            `launched despite a drafter/algorithm mismatch (stages.deploy.allow-algorithm-mismatch, experiments only): ${refusal}`,
          );
        spec.speculative = {
          algorithm: d['speculative-algorithm'],
          draftModelPath: draft,
          numSteps: d['num-steps'],
          eagleTopk: d['eagle-topk'],
          numDraftTokens: d['num-draft-tokens'],
        };
        spec.maxRunningRequests = d['max-running-requests'];
        spec.specV2 = d['spec-v2'];
        if (input.maxConcurrency) {
          const ready = vllm
            ? vllmBenchmarkArgs(spec, input.maxConcurrency)
            : benchmarkReadyArgs(spec, input.maxConcurrency);
          Object.assign(spec, ready.spec);
          notes.push(...ready.notes);
        }
        speculative = { algorithm: d['speculative-algorithm'], draftModelPath: draft };
      }
      let argv: string[];
      try {
        argv = vllm ? renderVllmArgv(spec) : renderServerArgv(spec);
        if (!vllm) notes.push(...releaseNotes(spec, config.server.env));
      } catch (err) {
        throw fatal('ConfigError', `cannot launch the ${role} server: ${(err as Error).message}`);
      }
      if (capture?.env) {
        // The plugin's own judge of the line (extra-args included): a launch it would refuse never starts.
        const fixes = await captureLaunchFixes(
          host,
          capture.py,
          capture.spec.sglangVersion,
          argv.slice(config.server.launcher.length),
        );
        if (fixes.length > 0)
          throw fatal(
            'ConfigError',
            `aerie's capture cannot run on this extraction launch: ${fixes.join('; ')}. Fix: change server.extra-args accordingly`,
          );
      }
      const made = (record: ProcRecord, reattached: boolean): ServerLaunch => ({
        role,
        launchId: record.launchId,
        host: record.host,
        port: spec.port,
        pid: record.pid,
        pgid: record.pgid,
        logPath: record.logPath,
        argv: record.argv,
        modelPath: spec.modelPath,
        tpSize: spec.tpSize,
        speculative,
        ...(capture ? { captureLayers: capture.spec.draftLayerIds } : {}),
        ...(vllm ? { engine: 'vllm' as const } : { sglangVersion: release.version, sglangVersionHow: release.how }),
        reattached,
        notes,
        watchMs: config.server.readiness['poll-interval'],
        record,
      });

      // A live launch of this role from an earlier attempt is re-attached, never duplicated.
      // One with another command line (the config changed) is ours to stop and replace.
      const latest = await latestGeneration(host, prefix);
      const latestState = latest ? (await host.procStatus(latest.record)).state : undefined;
      if (latest && latestState === 'alive') {
        if (sameArgv(latest.record.argv, argv)) return made(latest.record, true);
        await host.killGroup(latest.record, { graceMs: 15_000 });
        notes.push(
          `stopped ${latest.record.launchId} (pid ${latest.record.pid}): it ran another command line than this config asks for`,
        );
      } else if (latest && latestState === 'orphans') {
        // Its leader is gone but processes it started in sessions of their own still run (and may hold the GPUs).
        await host.killGroup(latest.record, { graceMs: 15_000 });
        notes.push(
          `stopped what ${latest.record.launchId} (pid ${latest.record.pid}) left running in sessions of their own`,
        );
      }
      const gen = latest ? latest.gen + 1 : 0;
      const holder = await portHolderOf(host, config.server.port);
      if (holder.listening && !(await startedButUnrecorded(host, `${prefix}${gen}`, holder.pgid))) {
        throw fatal(
          'PortInUseError',
          `port ${config.server.port} on ${host.name} is already held by ${describeHolder(holder)}; aerie did not start it and will not stop it. ` +
            `Free the port or set server.port`,
          { holderPid: holder.pid, holderCommand: holder.command },
        );
      }
      let env: Record<string, string>;
      try {
        const base = expandEnv(withRunGpus(config, config.server.env));
        env = vllm ? vllmLaunchEnv(base) : serverLaunchEnv(base, capture?.env, spec);
      } catch (err) {
        if (err instanceof ApplicationFailure) throw err;
        throw fatal('ConfigError', (err as Error).message);
      }
      // The plugin refuses a dump folder that does not exist (py/aerie_hs/sglang_hook.py).
      if (capture) await host.mkdirp(capture.dumpDir);
      await host.mkdirp(paths.logs);
      const { record, reattached } = await host.spawnDetached(`${prefix}${gen}`, argv, {
        env,
        cwd: paths.root,
        logPath: `${paths.logs}/server-${name}-${gen}.log`,
      });
      return made(record, reattached);
    },
  };
}
