/**
 * Turning aerie's capture on at server start-up, in SGLang's order: the scheduler loads its
 * general plugins first thing (sglang==0.5.23:sglang/srt/managers/scheduler.py:6322, before the
 * try block that reports "Scheduler hit an exception"), so a plugin's SystemExit ends the
 * scheduler process with just its message and the launcher reports the dead rank
 * (sglang==0.5.23:sglang/srt/entrypoints/engine.py:2002-2010); then the weights load, which the
 * capture's states must agree with.
 */
import fs from 'node:fs';
import path from 'node:path';
import { CaptureWriter, HiddenStates, captureIds } from './capture.js';
import type { SimLM } from './lm.js';
import type { SimLog } from './log.js';
import type { ModelConfig } from './model.js';
import { PLUGIN_GROUP, PLUGIN_VALUE, discoverPlugins, launchFixesMessage, runPluginStartup } from './plugin.js';
import type { Resolved, SimEnv } from './settings.js';
import { serverHsMode } from './stock.js';
import { atLeast } from './release.js';
import { loadFrames, schedulerException } from './tracebacks.js';
import { readTargetWeights } from './weights.js';

const SITE = '/usr/local/lib/python3.12/dist-packages';

export interface CaptureStart {
  /** After server_args: load plugins; the death text when the scheduler would exit. */
  plugins(): string | null;
  /** After the weight load: the scheduler traceback when the capture cannot get its weights. */
  weights(): string | null;
  /** The writer, once both steps passed with the plugin installed. */
  writer: CaptureWriter | null;
  /** The model's states, when the plugin or the stock return_hidden_states path needs them. */
  states: HiddenStates | null;
}

// The launcher's frames (sglang==0.5.23: launch_server.py:84,67; entrypoints/http_server.py:3156;
// entrypoints/engine.py:1350,995,2027-2029) and its error (engine.py:2002-2010).
function schedulerDied(rank: number, code: number): string {
  return [
    // raised in `except EOFError:`, so Python prints the EOFError first, chained
    'Traceback (most recent call last):',
    `  File "${SITE}/sglang/srt/entrypoints/engine.py", line 2027, in _wait_for_scheduler_ready`,
    '    data = scheduler_pipe_readers[i].recv()',
    '  File "/usr/lib/python3.12/multiprocessing/connection.py", line 250, in recv',
    '    buf = self._recv_bytes()',
    '  File "/usr/lib/python3.12/multiprocessing/connection.py", line 430, in _recv_bytes',
    '    buf = self._recv(4)',
    '  File "/usr/lib/python3.12/multiprocessing/connection.py", line 399, in _recv',
    '    raise EOFError',
    'EOFError',
    '',
    'During handling of the above exception, another exception occurred:',
    '',
    'Traceback (most recent call last):',
    '  File "<frozen runpy>", line 198, in _run_module_as_main',
    '  File "<frozen runpy>", line 88, in _run_code',
    `  File "${SITE}/sglang/launch_server.py", line 84, in <module>`,
    '    run_server(server_args)',
    `  File "${SITE}/sglang/launch_server.py", line 67, in run_server`,
    '    launch_server(server_args)',
    `  File "${SITE}/sglang/srt/entrypoints/http_server.py", line 3156, in launch_server`,
    '    ) = Engine._launch_subprocesses(',
    `  File "${SITE}/sglang/srt/entrypoints/engine.py", line 1350, in _launch_subprocesses`,
    '    scheduler_init_result.wait_for_ready()',
    `  File "${SITE}/sglang/srt/entrypoints/engine.py", line 995, in wait_for_ready`,
    '    infos = _wait_for_scheduler_ready(scheduler_pipe_readers, scheduler_procs)',
    `  File "${SITE}/sglang/srt/entrypoints/engine.py", line 2029, in _wait_for_scheduler_ready`,
    '    raise _scheduler_died_error(i, scheduler_procs[i])',
    `RuntimeError: Rank ${rank} scheduler died during initialization (exit code: ${code}). If exit code is -9 (SIGKILL), ` +
      'a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.',
  ].join('\n');
}

export function captureStart(o: {
  log: SimLog;
  env: SimEnv;
  procEnv: NodeJS.ProcessEnv;
  argv: string[];
  target: ModelConfig;
  resolved: Resolved;
  lm: SimLM;
}): CaptureStart {
  const { log, procEnv } = o;
  const tp = o.resolved.args.tp_size as number;
  let installed = false;
  const state: CaptureStart = {
    writer: null,
    states: null,
    plugins() {
      // General plugins arrive in 0.5.12 (sglang==0.5.12:srt/plugins/__init__.py); 0.5.4 and 0.5.9
      // load none, so aerie's capture there is never installed and writes nothing.
      if (!atLeast(o.env.release, '0.5.12')) return null;
      const found = discoverPlugins(procEnv.PYTHONPATH);
      if (found.length === 0) return null;
      // sglang==0.5.23:sglang/srt/plugins/__init__.py:51-86 (SGLANG_PLUGINS is a whitelist of names)
      const allowed = procEnv.SGLANG_PLUGINS
        ? new Set(
            procEnv.SGLANG_PLUGINS.split(',')
              .map((s) => s.trim())
              .filter(Boolean),
          )
        : null;
      for (let r = 0; r < tp; r++) {
        log.info(`Available plugins for group ${PLUGIN_GROUP}:`, r);
        for (const p of found) log.info(`  - ${p.name} -> ${p.value}`, r);
      }
      const ours = found.find((p) => p.value === PLUGIN_VALUE);
      if (!ours) return null;
      if (allowed && !allowed.has(ours.name)) {
        log.infoAllRanks(tp, `Skipping plugin ${ours.name} (not in SGLANG_PLUGINS)`);
        return null;
      }
      const out = runPluginStartup(o.argv, procEnv, o.env.release);
      if (out.kind === 'load-error') {
        for (let r = 0; r < tp; r++)
          log.error(`Failed to load plugin ${ours.name} from group ${PLUGIN_GROUP}\n${out.traceback.trimEnd()}`, r);
        return null;
      }
      log.infoAllRanks(tp, `Loaded plugin ${ours.name} from group ${PLUGIN_GROUP}`);
      if (out.kind === 'exception') {
        // plugins/__init__.py:129-138: logged, and the server runs on without the capture
        for (let r = 0; r < tp; r++)
          log.error(`Failed to execute general plugin: ${ours.name}\n${out.traceback.trimEnd()}`, r);
        return null;
      }
      const exit =
        out.kind === 'exit'
          ? out.message
          : out.kind === 'installed' && out.fixes.length > 0
            ? launchFixesMessage(out.fixes, o.env.release)
            : null;
      // multiprocessing prints a SystemExit's str code to stderr and exits 1
      if (exit !== null) return `${exit}\n${schedulerDied(0, 1)}`;
      log.infoAllRanks(tp, `Executed general plugin: ${ours.name}`);
      installed = out.kind === 'installed';
      return null;
    },
    weights() {
      if (!installed && serverHsMode(o.resolved.args) === null) return null;
      const dir = o.target.path;
      const w = readTargetWeights(dir);
      if (!w) {
        // sglang==0.5.23:sglang/srt/model_loader/loader.py:581
        return schedulerException(
          log.stamp(0),
          loadFrames(),
          `RuntimeError: Cannot find any model weights with \`${dir}\`` +
            ` (the simulator target's weights: node bin/aerie-sim.mjs make-target ${dir})`,
        );
      }
      if (w.hidden !== o.target.hiddenSize || w.vocab !== o.target.vocabSize) {
        return schedulerException(
          log.stamp(0),
          loadFrames(),
          `RuntimeError: ${path.join(dir, 'model.safetensors')}: lm_head.weight is ` +
            `[${w.vocab}, ${w.hidden}], config.json says [${o.target.vocabSize}, ${o.target.hiddenSize}]`,
        );
      }
      const draft = o.resolved.args.return_aux_hidden_state_layer_ids as number[] | null;
      const ids = captureIds(draft, o.target.numLayers);
      state.states = new HiddenStates(w, o.lm, ids, o.target.numLayers);
      if (!installed) return null;
      const dumpDir = procEnv.AERIE_HS_DUMP_DIR as string;
      state.writer = new CaptureWriter({
        dir: fs.realpathSync(dumpDir),
        states: state.states,
        fault: o.env.hsFault,
        faultEvery: o.env.hsFaultEvery,
        logError: (msg) => log.error(msg, 0),
      });
      return null;
    },
  };
  return state;
}
