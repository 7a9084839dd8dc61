/**
 * What stage tests need to run the simulator as an extraction server with aerie's capture:
 * the 0.5.23 launch flags aerie renders, the environment aerie gives the launch, the
 * simulator target's weights, and the host-side interpreter (numpy + transformers, no torch).
 */
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { renderServerArgv, serverLaunchEnv } from '../../src/sglang/launch-argv.js';

const ROOT = resolve(import.meta.dirname, '../..');
export const VENV_PY = join(ROOT, '.venv-specforge/bin/python');
/** examples/models/sim-llama-8b-eagle3-draft.json's eagle_aux_hidden_state_layer_ids. */
export const DRAFT_IDS = [1, 7, 13];

/** The flags aerie's launch adds for the capture on SGLang 0.5.23, rendered by aerie itself. */
export const CAPTURE_FLAGS = renderServerArgv({
  launcher: ['sim'],
  modelPath: 'm',
  port: 1,
  tpSize: 1,
  extraArgs: [],
  extraction: true,
  capture: { sglangVersion: '0.5.23', draftLayerIds: DRAFT_IDS },
}).slice(9); // after: sim --model-path m --host 127.0.0.1 --port 1 --tp-size 1

/** The environment aerie gives the extraction launch (PYTHONPATH, AERIE_HS_DUMP_DIR, AERIE_HS_AUX_LAYERS). */
export function captureSimEnv(pythonPath: string, dumpDir: string, extra: Record<string, string> = {}): Record<string, string> {
  const { PYTHONUNBUFFERED: _, ...env } = serverLaunchEnv({}, { pythonPath, dumpDir, draftLayerIds: DRAFT_IDS });
  return { ...env, ...extra };
}

/** The example target's weights: made by set-up; made here too (idempotent) so a test never depends on set-up order. */
export async function ensureSimTarget(): Promise<void> {
  const r = spawnSync(process.execPath, [join(ROOT, 'bin/aerie-sim.mjs'), 'make-target', join(ROOT, 'examples/models/sim-llama-8b')], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`make-target failed: ${r.stderr}`);
}

export async function readJsonl<T>(path: string): Promise<T[]> {
  return (await readFile(path, 'utf8')).split('\n').filter(Boolean).map((l) => JSON.parse(l) as T);
}
