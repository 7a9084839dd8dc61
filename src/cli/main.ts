/**
 * aerie: train-to-benchmark EAGLE-3 drafter pipelines for SGLang on Temporal.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { AERIE_HOME, ConfigError, configJsonSchema } from '../config/load.js';
import { TASK_QUEUE_NAME, TASK_QUEUE_RULE } from '../config/schema/hosts.js';
import { TASK_QUEUE } from '../shared.js';
import { connectWorker, resolveTemporal, webUiUrl } from '../temporal/connect.js';
import { CliError, reachTemporal } from './reach.js';
import { ReleaseError } from '../sglang/releases.js';
import { ensureDevServer, stopDevServer, stateDir } from '../temporal/dev-server.js';
import { createWorker } from '../worker.js';
import { doctorCommand } from './doctor.js';
import { reportCommand } from './report.js';
import { resumeCommand, runCommand } from './run.js';
import { statusCommand } from './status.js';
import { cancelCommand, retryCommand } from './operator.js';

const USAGE = `aerie — EAGLE-3 drafter pipelines for SGLang, as one durable Temporal workflow

  aerie run <config.yaml> [--no-worker]   start a run: preflight → generate → extract → train → deploy → benchmark
  aerie plan <config.yaml>                every command and environment each stage would run, per host; runs nothing
  aerie resume <run> [--config <file>]    continue a failed or interrupted run; finished stages are not redone
  aerie status <run>                      stages, current phase, failure (of a sweep: each variant's run)
  aerie retry <run> [--stage S]           after a failure the run waits on (run.on-failure: wait): re-run from S
  aerie cancel <run>                      stop the run and every server and job it launched (a sweep: all its runs)
  aerie report <run>                      the benchmark table and where report.html, report.md, results.jsonl are
  aerie compare <run> <run> …             runs side by side (settings that differ, speedup, crossover, GPU-hours): md + html
  aerie sweep <config.yaml> --vary k=a,b [--vary …] [--no-worker]
                                          the variants as child runs of one sweep; stages they share run once;
                                          one report with the best marked (.aerie/sweeps/<sweep>/sweep.md, .html)
  aerie hosts [config.yaml]               hosts, their GPUs, which run holds them since when, and who waits
  aerie doctor <config.yaml>              check the target host (SSH, interpreters, port, GPUs, paths, disk) without starting a run
  aerie demo                              the whole pipeline on the bundled simulator (examples/demo.yaml)
  aerie worker [--task-queue Q]           run a worker for the aerie task queue; with Q, only the activities of
                                          hosts whose task-queue is Q (on a machine that reaches them)
  aerie dev-server [--stop]               run (or stop) aerie's local Temporal dev server with the Web UI
  aerie schema [out.json]                 write the config's JSON Schema (editor completion)
  aerie version                           the version, and whether this is the compiled build or the sources

Temporal: TEMPORAL_ADDRESS / a temporal envconfig profile when set; otherwise aerie's own dev server
(state in $AERIE_STATE_DIR, default ./.aerie).`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  const { values, positionals } = parseArgs({
    args: rest,
    allowPositionals: true,
    options: {
      'no-worker': { type: 'boolean', default: false },
      config: { type: 'string' },
      stage: { type: 'string' },
      'task-queue': { type: 'string' },
      stop: { type: 'boolean', default: false },
      vary: { type: 'string', multiple: true },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (!command || values.help || command === 'help') {
    process.stdout.write(USAGE + '\n');
    return command ? 0 : 2;
  }
  switch (command) {
    case 'run':
      if (!positionals[0]) return usage('run needs a config file');
      return runCommand(positionals[0], { worker: !values['no-worker'] });
    case 'plan': {
      if (!positionals[0]) return usage('plan needs a config file');
      const { planCommand } = await import('./plan.js');
      return planCommand(positionals[0]);
    }
    case 'demo':
      process.stdout.write('aerie demo: the full pipeline against the simulator (sim/) on this machine\n');
      // Simulated GPUs: the simulators this worker launches register their GPU memory here and
      // the demo's nvidia-smi (the simulator's) reports it, so stops wait for GPU release as on
      // a real host. Scoped to the demo's state dir: other simulator runs never see it.
      process.env.AERIE_SIM_GPU_DIR ??= join(stateDir(), 'sim-gpus');
      return runCommand(join(AERIE_HOME, 'examples', 'demo.yaml'), { worker: true });
    case 'resume':
      if (!positionals[0]) return usage('resume needs a run id');
      return resumeCommand(positionals[0], { worker: !values['no-worker'], configPath: values.config });
    case 'doctor':
      if (!positionals[0]) return usage('doctor needs a config file');
      return doctorCommand(positionals[0]);
    case 'retry':
      if (!positionals[0]) return usage('retry needs a run id');
      return retryCommand(positionals[0], values.stage, { worker: !values['no-worker'] });
    case 'cancel': {
      if (!positionals[0]) return usage('cancel needs a run id');
      const { isSweepId } = await import('./sweep-status.js');
      if (await isSweepId(positionals[0])) {
        const { sweepCancelCommand } = await import('./sweep.js');
        return sweepCancelCommand(positionals[0], { worker: !values['no-worker'] });
      }
      return cancelCommand(positionals[0], { worker: !values['no-worker'] });
    }
    case 'status': {
      if (!positionals[0]) return usage('status needs a run id');
      const { isSweepId, sweepStatusCommand } = await import('./sweep-status.js');
      if (await isSweepId(positionals[0])) return sweepStatusCommand(positionals[0]);
      return statusCommand(positionals[0]);
    }
    case 'report':
      if (!positionals[0]) return usage('report needs a run id');
      return reportCommand(positionals[0]);
    case 'compare': {
      if (positionals.length < 2) return usage('compare needs two or more run ids');
      const { compareCommand } = await import('./compare.js');
      return compareCommand(positionals);
    }
    case 'sweep': {
      if (!positionals[0])
        return usage('sweep needs a config file and at least one --vary <config.path>=<value>,<value>');
      const { sweepCommand } = await import('./sweep.js');
      return sweepCommand(positionals[0], values.vary ?? [], { worker: !values['no-worker'] });
    }
    case 'hosts': {
      const { hostsCommand } = await import('./hosts.js');
      return hostsCommand(positionals[0]);
    }
    case 'worker':
      return workerCommand(values['task-queue']);
    case 'version': {
      const pkg = JSON.parse(await readFile(join(AERIE_HOME, 'package.json'), 'utf8')) as { version: string };
      process.stdout.write(`aerie ${pkg.version} — ${howRunning()}\n`);
      return 0;
    }
    case 'dev-server':
      return devServerCommand(values.stop);
    case 'schema': {
      const out = positionals[0] ?? join(process.cwd(), 'aerie.schema.json');
      await writeFile(out, JSON.stringify(configJsonSchema(), null, 2) + '\n');
      process.stdout.write(`wrote ${out}\n`);
      return 0;
    }
    default:
      return usage(`unknown command "${command}"`);
  }
}

/** Compiled, the worker loads the prebuilt workflow bundle and no loader thread: ~130 MB leaner. */
const COMPILED = import.meta.url.endsWith('.js');
function howRunning(): string {
  return COMPILED
    ? 'compiled (dist/, prebuilt workflow bundle)'
    : 'from source through tsx (dist/ is missing or older than the sources; `npm run build` makes it)';
}

function usage(problem: string): number {
  process.stderr.write(`aerie: ${problem}\n\n${USAGE}\n`);
  return 2;
}

/**
 * Without a queue: workflows and activities on the pipeline's queue. With one (a site's, as
 * hosts.<name>.task-queue names it): that site's activities only; the workflows stay with a
 * pipeline worker elsewhere.
 */
async function workerCommand(siteQueue: string | undefined): Promise<number> {
  if (siteQueue !== undefined && !TASK_QUEUE_NAME.test(siteQueue)) {
    return usage(`--task-queue "${siteQueue}" is not a task queue name: ${TASK_QUEUE_RULE}`);
  }
  const target = await resolveTemporal();
  (await reachTemporal(target)).connection.close().catch(() => undefined);
  const connection = await connectWorker(target);
  const { worker, hosts } = await createWorker({
    connection,
    namespace: target.namespace,
    ...(siteQueue ? { taskQueue: siteQueue, activitiesOnly: true } : {}),
  });
  const serves = siteQueue
    ? `worker on task queue ${siteQueue}, activities only (hosts with task-queue: ${siteQueue})`
    : `worker on task queue ${TASK_QUEUE}`;
  process.stdout.write(
    `${serves} at ${target.address}${webUiUrl(target) ? ` — ${webUiUrl(target)}` : ''} (${COMPILED ? 'compiled' : 'from source'})\n`,
  );
  const stop = () => worker.shutdown();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  await worker.run();
  await hosts.closeAll();
  await connection.close();
  return 0;
}

async function devServerCommand(stop: boolean): Promise<number> {
  if (stop) {
    const stopped = await stopDevServer();
    process.stdout.write(stopped ? 'stopped aerie dev server\n' : 'no aerie dev server is running\n');
    return 0;
  }
  const rec = await ensureDevServer();
  const client = await reachTemporal({
    address: rec.address,
    namespace: 'default',
    devServer: rec,
    connectionOptions: { address: rec.address },
  });
  await client.connection.close();
  process.stdout.write(
    `Temporal dev server (pid ${rec.pid}) at ${rec.address}\nWeb UI: http://127.0.0.1:${rec.uiPort}\nstate: ${stateDir()} (history persists in ${rec.dbPath})\nstop it with: aerie dev-server --stop\n`,
  );
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    // A release refusing a config names the field and the fix: a message, not a stack trace.
    if (err instanceof CliError || err instanceof ReleaseError) {
      process.stderr.write(`aerie: ${err.message}\n`);
      process.exit(1);
    }
    process.stderr.write(`aerie: ${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  },
);
