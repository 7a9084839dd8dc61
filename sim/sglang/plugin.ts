/**
 * aerie's capture plugin (py/aerie_hs/sglang_hook.py), as an SGLang 0.5.23 server would find
 * and run it: discovered through an entry point in the launch's PYTHONPATH, loaded early in each
 * scheduler process, and its start-up decisions taken by the plugin's own Python code, so the
 * simulator refuses exactly the launches the real plugin refuses.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** The release the plugin check assumes when none is given (the simulator passes the release it imitates). */
export const CAPTURE_SGLANG_VERSION = '0.5.23';
// sglang==0.5.23:sglang/srt/plugins/__init__.py:29
export const PLUGIN_GROUP = 'sglang.srt.plugins';
export const PLUGIN_VALUE = 'aerie_hs.sglang_hook:plugin';

export interface FoundPlugin {
  name: string;
  value: string;
  /** The PYTHONPATH folder whose *.dist-info announced it. */
  folder: string;
}

/** Entry points of `group` in the *.dist-info folders of each PYTHONPATH entry (importlib.metadata's view of them). */
export function discoverPlugins(pythonPath: string | undefined, group = PLUGIN_GROUP): FoundPlugin[] {
  const found: FoundPlugin[] = [];
  for (const folder of (pythonPath ?? '').split(':').filter((p) => p !== '')) {
    let names: string[];
    try {
      names = fs
        .readdirSync(folder)
        .filter((n) => n.endsWith('.dist-info'))
        .sort();
    } catch {
      continue;
    }
    for (const dist of names) {
      let text: string;
      try {
        text = fs.readFileSync(path.join(folder, dist, 'entry_points.txt'), 'utf8');
      } catch {
        continue;
      }
      let section = '';
      for (const raw of text.split('\n')) {
        const line = raw.trim();
        const head = /^\[(.+)\]$/.exec(line);
        if (head) {
          section = head[1].trim();
          continue;
        }
        const eq = line.indexOf('=');
        if (section === group && eq > 0)
          found.push({
            name: line.slice(0, eq).trim(),
            value: line.slice(eq + 1).trim(),
            folder: path.resolve(folder),
          });
      }
    }
  }
  return found;
}

export type PluginOutcome =
  /** plugin() returned without installing (AERIE_HS_DUMP_DIR unset). */
  | { kind: 'inert' }
  /** Installed; `fixes` is check_launch_args' list for this launch. */
  | { kind: 'installed'; fixes: string[] }
  /** SystemExit: the scheduler process ends with this message. */
  | { kind: 'exit'; message: string }
  /** ep.load() failed (import error): SGLang logs it and runs without the plugin. */
  | { kind: 'load-error'; traceback: string }
  /** plugin() raised an Exception: SGLang logs it and runs without the plugin. */
  | { kind: 'exception'; traceback: string };

// Runs the real module: its version check, AERIE_HS_AUX_LAYERS parsing and dump-dir check
// (plugin(), with the torch-side patching replaced by a no-op and the installed version set to
// the release imitated), then check_launch_args on this launch's argv.
const CHECK = `
import json, os, sys, traceback
version, argv = sys.argv[1], json.loads(sys.argv[2])
sys.argv = ["launch_server.py"] + argv
out = {}
try:
    import aerie_hs.sglang_hook as m
except Exception:
    print(json.dumps({"kind": "load-error", "traceback": traceback.format_exc()}))
    sys.exit(0)
m._installed_version = lambda: version
m._patch_0_5_23 = lambda *a, **k: None
m._patch_0_5_12 = lambda *a, **k: None
try:
    m.plugin()
    if m._state.get("version") is None:
        out = {"kind": "inert"}
    else:
        out = {"kind": "installed", "fixes": m.check_launch_args(version, argv)}
except SystemExit as e:
    out = {"kind": "exit", "message": "" if e.code is None else str(e.code)}
except Exception:
    out = {"kind": "exception", "traceback": traceback.format_exc()}
print(json.dumps(out))
`;

/** Run the plugin's start-up in python3 with the launch's environment. */
export function runPluginStartup(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
  release: string = CAPTURE_SGLANG_VERSION,
  python = 'python3',
): PluginOutcome {
  const r = spawnSync(python, ['-c', CHECK, release, JSON.stringify(argv)], {
    env: { ...env, PYTHONDONTWRITEBYTECODE: '1' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  const last = (r.stdout ?? '').trim().split('\n').pop() ?? '';
  try {
    return JSON.parse(last) as PluginOutcome;
  } catch {
    return {
      kind: 'load-error',
      traceback: `${python} could not run the plugin check (${r.error?.message ?? `exit ${r.status}`}):\n${r.stderr ?? ''}`,
    };
  }
}

/** The SystemExit the capture would raise for a launch missing what it needs (see the report: plugin() should call check_launch_args). */
export function launchFixesMessage(fixes: string[], release: string = CAPTURE_SGLANG_VERSION): string {
  return `aerie's hidden-state capture cannot work with this launch of SGLang ${release}: ${fixes.join('; ')}`;
}
