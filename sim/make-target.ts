/**
 * `aerie-sim make-target <dir>`: the simulator target's weights (sim/sglang/weights.ts) from the
 * sizes in <dir>/config.json, written once; a file already holding exactly those tensors is kept.
 */
import fs from 'node:fs';
import path from 'node:path';
import { WEIGHTS_FILE, writeTargetWeights } from './sglang/weights.js';

export function runMakeTarget(argv: string[]): number {
  if (argv.length !== 1 || argv[0].startsWith('-')) {
    process.stderr.write('usage: aerie-sim make-target <model dir with config.json>\n');
    return 2;
  }
  const dir = path.resolve(argv[0]);
  let cfg: Record<string, unknown>;
  try {
    cfg = JSON.parse(fs.readFileSync(path.join(dir, 'config.json'), 'utf8')) as Record<string, unknown>;
  } catch (e) {
    process.stderr.write(`aerie-sim make-target: ${dir}/config.json: ${(e as Error).message}\n`);
    return 2;
  }
  const vocab = cfg.vocab_size;
  const hidden = cfg.hidden_size;
  if (!Number.isInteger(vocab) || !Number.isInteger(hidden) || (vocab as number) < 1 || (hidden as number) < 1) {
    process.stderr.write(`aerie-sim make-target: ${dir}/config.json needs integer vocab_size and hidden_size\n`);
    return 2;
  }
  const wrote = writeTargetWeights(dir, vocab as number, hidden as number);
  process.stdout.write(
    `${wrote ? 'wrote' : 'up to date:'} ${path.join(dir, WEIGHTS_FILE)} (lm_head.weight [${vocab}, ${hidden}], model.norm.weight [${hidden}], bf16)\n`,
  );
  return 0;
}
