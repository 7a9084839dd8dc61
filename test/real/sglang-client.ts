/**
 * SGLang's own client code as a judge: the venv scripts/setup-sglang-client.sh makes
 * (PyPI sglang==0.5.4 without deps, what its bench_serving imports, the openai client).
 * A missing venv fails the test that needs it, naming the script: these tests never skip.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { AERIE_HOME } from '../../src/config/load.js';

export const SGLANG_BENCH_VENV = join(AERIE_HOME, '.venv-sglang-bench');
export const SGLANG_BENCH_PYTHON = join(SGLANG_BENCH_VENV, 'bin', 'python');
/** The target bench_serving tokenizes with: its tokenizer.json was built locally (scripts/sim-model/), nothing from a hub. */
export const SIM_TARGET = join(AERIE_HOME, 'examples', 'models', 'sim-llama-8b');
export const SIM_DRAFT_CONFIG = join(AERIE_HOME, 'examples', 'models', 'sim-llama-8b-eagle3-draft.json');

/** The venv's python, or an error that says how to make it. */
export function sglangBenchPython(): string {
  // The marker is written last, after the import check: a half-built venv has none.
  if (!existsSync(join(SGLANG_BENCH_VENV, '.aerie-pins')) || !existsSync(SGLANG_BENCH_PYTHON)) {
    throw new Error(
      `${SGLANG_BENCH_VENV} is missing or incomplete: run \`bash scripts/setup-sglang-client.sh\` ` +
        '(it installs PyPI sglang==0.5.4 with --no-deps, what sglang.bench_serving imports, and openai)',
    );
  }
  return SGLANG_BENCH_PYTHON;
}

/** Keeps transformers and huggingface_hub off the network: the tokenizer must come from disk. */
export const OFFLINE_ENV = { HF_HUB_OFFLINE: '1', TRANSFORMERS_OFFLINE: '1', HF_HUB_DISABLE_TELEMETRY: '1' };
