/**
 * The real SpecForge as a judge: its config loader (PyPI specforge==0.2.0, set-up's pinned
 * .venv-specforge) and its v0.2 scripts' argument parsers (rebuilt from the add_argument calls
 * recorded under test/fixtures/real/specforge-<commit>/argparse/). Nothing here imitates
 * SpecForge: every verdict comes from SpecForge's own code or from Python's argparse.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { AERIE_HOME } from '../../src/config/load.js';
import { runSync } from '../support/processes.js';
import { useWorkdir } from '../support/workdir.js';

export const SPECFORGE_PYTHON = join(AERIE_HOME, '.venv-specforge', 'bin', 'python');
export const FIXTURES = join(AERIE_HOME, 'test', 'fixtures', 'real');

function python(): string {
  if (!existsSync(SPECFORGE_PYTHON)) {
    throw new Error(
      `${SPECFORGE_PYTHON} is missing: run \`bash scripts/setup.sh --test\` (it installs PyPI's specforge==0.2.0 there)`,
    );
  }
  return SPECFORGE_PYTHON;
}

export interface SchemaVerdict {
  ok: boolean;
  errors: { loc: string; msg: string }[];
  specforge: string;
}

// The checks of one test file share one folder; it goes when the file's tests are done.
const scratch = useWorkdir('aerie-sfschema-');

/** `specforge train -c <file> <overrides>` up to the point where the Config is built and validated. */
export function specforgeSchemaCheck(configYaml: string, overrides: string[] = []): SchemaVerdict {
  // from_file picks YAML by the extension (Config.from_file), so the name must end in .yaml.
  const file = join(scratch.path, `config-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, configYaml);
  const res = runSync(python(), [join(AERIE_HOME, 'scripts', 'real', 'specforge_config_check.py'), file, ...overrides]);
  if (res.code !== 0) throw new Error(`specforge_config_check.py exited ${res.code}: ${res.stdout}${res.stderr}`);
  return JSON.parse(res.stdout) as SchemaVerdict;
}

export interface ArgvVerdict {
  status: number;
  /** argparse's own message on a rejection (stderr). */
  message: string;
  /** The parsed namespace on success. */
  parsed?: Record<string, unknown>;
}

/** Parses argv (the script's arguments, without the interpreter or launcher) with the recorded parser. */
export function argparseCheck(specPath: string, args: string[]): ArgvVerdict {
  const res = runSync(python(), [join(AERIE_HOME, 'scripts', 'real', 'argparse_check.py'), specPath, '--', ...args]);
  if (res.code !== 0 && res.code !== 2)
    throw new Error(`argparse_check.py exited ${res.code}: ${res.stdout}${res.stderr}`);
  return {
    status: res.code,
    message: res.stderr.trim(),
    parsed: res.code === 0 ? (JSON.parse(res.stdout) as Record<string, unknown>) : undefined,
  };
}

export function argparseSpec(commit: string, script: 'train_eagle3' | 'prepare_hidden_states'): string {
  return join(FIXTURES, `specforge-${commit}`, 'argparse', `${script}.json`);
}
