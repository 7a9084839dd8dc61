/**
 * The real SpecForge as a judge: its config loader (PyPI specforge==0.2.0, set-up's pinned
 * .venv-specforge) and its v0.2 scripts' argument parsers (rebuilt from the add_argument calls
 * recorded under test/fixtures/real/specforge-<commit>/argparse/). Nothing here imitates
 * SpecForge: every verdict comes from SpecForge's own code or from Python's argparse.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { AERIE_HOME } from '../../src/config/load.js';

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

let scratch: string | undefined;
// The checks of one test file share one folder; it goes when the file's tests are done.
afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
  scratch = undefined;
});

/** `specforge train -c <file> <overrides>` up to the point where the Config is built and validated. */
export function specforgeSchemaCheck(configYaml: string, overrides: string[] = []): SchemaVerdict {
  scratch ??= mkdtempSync(join(tmpdir(), 'aerie-sfschema-'));
  // from_file picks YAML by the extension (Config.from_file), so the name must end in .yaml.
  const file = join(scratch, `config-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(file, configYaml);
  const res = spawnSync(
    python(),
    [join(AERIE_HOME, 'scripts', 'real', 'specforge_config_check.py'), file, ...overrides],
    { encoding: 'utf8' },
  );
  if (res.status !== 0) throw new Error(`specforge_config_check.py exited ${res.status}: ${res.stdout}${res.stderr}`);
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
  const res = spawnSync(python(), [join(AERIE_HOME, 'scripts', 'real', 'argparse_check.py'), specPath, '--', ...args], {
    encoding: 'utf8',
  });
  if (res.status !== 0 && res.status !== 2)
    throw new Error(`argparse_check.py exited ${res.status}: ${res.stdout}${res.stderr}`);
  return {
    status: res.status,
    message: res.stderr.trim(),
    parsed: res.status === 0 ? (JSON.parse(res.stdout) as Record<string, unknown>) : undefined,
  };
}

export function argparseSpec(commit: string, script: 'train_eagle3' | 'prepare_hidden_states'): string {
  return join(FIXTURES, `specforge-${commit}`, 'argparse', `${script}.json`);
}
