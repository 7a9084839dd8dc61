/** The demo config, moved into a test's own temp dir and free port, and made quicker. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { AERIE_HOME, parseConfigText } from '../../src/config/load.js';
import type { Config } from '../../src/config/schema.js';

export function demoConfig(workdir: string, port: number, tweak: (c: Config) => void = () => undefined): Config {
  const c = parseConfigText(readFileSync(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8'), 'demo.yaml');
  c.hosts.local!.workdir = workdir;
  c.server.port = port;
  if (c.stages.extract.driver === 'patched-server') c.stages.extract['dump-dir'] = join(workdir, 'shm');
  c.stages.benchmark.concurrencies = [1, 4, 16];
  c.stages.benchmark['output-len'] = 32;
  c.run.label = 'test';
  tweak(c);
  return c;
}

/**
 * The demo on the legacy drivers, which the demo used before aerie's capture and the current
 * SpecForge CLI: SpecForge's prepare_hidden_states.py as the v0.2.0 release has it
 * (`aerie-sim prepare-hidden-states`) and the v0.2 scripts' trainer (`aerie-sim train`) on its
 * files. Pinned to the v0.2.0 release (73e6f808), the sim's default, so neither preflight's
 * detection nor the sim's default decides which v0.2 runs; its servers are SGLang 0.5.4's.
 */
/** The SGLang release the legacy demo's servers imitate (SpecForge v0.2.0 is of its time, 2025). */
export const LEGACY_SGLANG = '0.5.4';

export function legacyDemoConfig(workdir: string, port: number, tweak: (c: Config) => void = () => undefined): Config {
  const doc = YAML.parse(readFileSync(join(AERIE_HOME, 'examples', 'demo.yaml'), 'utf8')) as {
    stages: Record<string, Record<string, unknown>>;
    server: Record<string, unknown>;
  };
  legacyDrivers(doc);
  // The SGLang of that era: the simulator imitates 0.5.4 (its /get_* routes, delta output_ids,
  // /health that always generates), and aerie renders every launch for it.
  const server = doc.server;
  server.launcher = ['${AERIE_HOME}/bin/aerie-sim.mjs', 'sglang', '--version', LEGACY_SGLANG];
  server['sglang-version'] = LEGACY_SGLANG;
  const c = parseConfigText(YAML.stringify(doc), 'demo.yaml (legacy drivers)');
  c.hosts.local!.workdir = workdir;
  c.server.port = port;
  c.stages.benchmark.concurrencies = [1, 4, 16];
  c.stages.benchmark['output-len'] = 32;
  c.run.label = 'test-legacy';
  tweak(c);
  return c;
}

/**
 * The legacy drivers on a parsed demo document: SpecForge v0.2.0's prepare_hidden_states.py
 * (`aerie-sim prepare-hidden-states`) writes the offline files and its train_eagle3.py
 * (`aerie-sim train`) trains on them, pinned to v0.2.0. Shared with the engines e2e.
 */
export function legacyDrivers(doc: { stages: Record<string, Record<string, unknown>> }): void {
  const train = doc.stages.train!;
  doc.stages.extract = {
    driver: 'specforge-offline',
    launcher: ['${AERIE_HOME}/bin/aerie-sim.mjs', 'prepare-hidden-states'],
    'draft-model-config': train['draft-model-config'],
    'batch-size': 8,
    'file-group-size': 64,
    env: { AERIE_SIM_TIME_SCALE: '0.01', AERIE_SIM_SPECFORGE_REVISION: 'v0.2.0' },
  };
  doc.stages.train = {
    driver: 'specforge-v0.2',
    'specforge-revision': 'v0.2.0',
    launcher: ['${AERIE_HOME}/bin/aerie-sim.mjs', 'train'],
    'draft-model-config': train['draft-model-config'],
    'num-epochs': train['num-epochs'],
    'save-interval': train['save-interval'],
    env: { ...(train.env as Record<string, string>), AERIE_SIM_SPECFORGE_REVISION: 'v0.2.0' },
  };
}
