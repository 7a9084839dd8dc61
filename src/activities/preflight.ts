/**
 * Preflight: everything that can be known to be wrong before a model spends ten minutes
 * loading. All problems are reported at once, each saying what to change.
 */
import type { Host } from '../hosts/host.js';
import { checkDrafterCompat } from '../sglang/drafter-check.js';
import { fatal, runPaths, type ActivityDeps, type RunRef } from './context.js';

/** `python -m pkg.mod` launchers: the interpreter must be able to import the module (incident 1). */
export function moduleLaunch(launcher: readonly string[]): { interpreter: string; module: string } | null {
  const i = launcher.indexOf('-m');
  if (i < 1 || i + 1 >= launcher.length) return null;
  return { interpreter: launcher[0]!, module: launcher[i + 1]! };
}

async function checkProgram(host: Host, launcher: readonly string[], what: string, problems: string[]): Promise<void> {
  const program = launcher[0]!;
  const found = await host.exec(['sh', '-c', 'command -v -- "$1"', 'sh', program]);
  if (found.code !== 0) {
    problems.push(`${what}: "${program}" is not an executable on ${host.name} (check the path or the PATH of the host)`);
    return;
  }
  const mod = moduleLaunch(launcher);
  if (!mod) return;
  const probe = await host.exec([
    mod.interpreter,
    '-c',
    'import importlib.util, sys\nsys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 3)',
    mod.module,
  ]);
  if (probe.code !== 0) {
    problems.push(
      `${what}: ${mod.interpreter} cannot import ${mod.module} on ${host.name} — the wrong interpreter? ` +
        `Point the launcher at the Python of the environment where SGLang is installed`,
    );
  }
}

async function readJson(host: Host, path: string): Promise<unknown | undefined> {
  try {
    return JSON.parse((await host.readFile(path)).toString('utf8'));
  } catch {
    return undefined;
  }
}

export function preflightActivities({ hosts }: ActivityDeps) {
  return {
    async preflight({ runId, config }: RunRef): Promise<{ note: string; checks: string[] }> {
      const host = hosts.get(config);
      const problems: string[] = [];
      const checks: string[] = [];
      const ping = await host.exec(['true']).catch((e: Error) => ({ code: -1, stderr: e.message }));
      if (ping.code !== 0) throw fatal('PreflightFailed', `host ${host.name} cannot run commands: ${ping.stderr}`);
      checks.push(`host ${host.name} reachable`);

      const paths = runPaths(host, runId);
      try {
        await host.mkdirp(paths.root);
        await host.writeFileAtomic(`${paths.root}/.aerie-write-test`, 'ok\n');
        await host.remove(`${paths.root}/.aerie-write-test`);
        checks.push(`run folder ${paths.root} writable`);
      } catch (err) {
        problems.push(`hosts.${host.name}.workdir: cannot write ${paths.root}: ${(err as Error).message}`);
      }

      await checkProgram(host, config.server.launcher, 'server.launcher', problems);
      await checkProgram(host, config.stages.train.launcher, 'stages.train.launcher', problems);

      const model = config.target['model-path'];
      if (!(await host.stat(`${model}/config.json`))) problems.push(`target.model-path: ${model}/config.json does not exist on ${host.name}`);
      const input = config.stages.generate.input;
      if (!(await host.stat(input))) problems.push(`stages.generate.input: ${input} does not exist on ${host.name}`);

      const deploy = config.stages.deploy;
      const draftPath = deploy['draft-model-path'] ? `${deploy['draft-model-path']}/config.json` : config.stages.train['draft-model-config'];
      const draft = await readJson(host, draftPath);
      if (draft === undefined) {
        problems.push(`${deploy['draft-model-path'] ? 'stages.deploy.draft-model-path' : 'stages.train.draft-model-config'}: cannot read ${draftPath} as JSON on ${host.name}`);
      } else {
        const refusal = checkDrafterCompat(deploy['speculative-algorithm'], draft);
        if (refusal) problems.push(`stages.deploy.speculative-algorithm: ${refusal}`);
        else checks.push(`drafter config fits ${deploy['speculative-algorithm']}`);
      }

      const port = config.server.port;
      const holder = await host.portHolder(port);
      if (holder.listening) {
        const ours = (await host.listLaunches()).find((r) => r.pid === holder.pid && r.launchId.startsWith(`${runId}.`));
        if (!ours) {
          const who = holder.pid ? `pid ${holder.pid}${holder.command ? ` (${holder.command})` : ''}` : 'a process aerie cannot see';
          problems.push(`server.port: ${port} on ${host.name} is held by ${who}; free it or choose another port`);
        }
      } else checks.push(`port ${port} free`);

      const gpus = await host.gpuInventory();
      if (!gpus.available) checks.push(`GPU check skipped: ${gpus.reason}`);
      else {
        const foreign = gpus.processes.filter((p) => !p.ours);
        if (foreign.length > 0) {
          problems.push(`GPUs on ${host.name} are in use by processes aerie did not start: ${foreign.map((p) => `pid ${p.pid} (${p.usedMemoryMiB} MiB)`).join(', ')} — aerie never stops them; free the GPUs first`);
        } else checks.push(`${gpus.gpus.length} GPUs free`);
      }

      if (problems.length > 0) {
        throw fatal('PreflightFailed', `preflight found ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n${problems.map((p) => `  - ${p}`).join('\n')}`, { problems });
      }
      return { note: checks.join('; '), checks };
    },
  };
}
