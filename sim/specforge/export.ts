/**
 * `aerie-sim specforge export --to sglang --checkpoint <dir> --draft-config <cfg> --output-dir <out>`:
 * turns a training checkpoint into a drafter SGLang can serve — config.json (architectures
 * LlamaForCausalLMEagle3, the draft vocab, the training the simulator records) and
 * model.safetensors with midlayer.*, fc, lm_head, d2t and t2d.
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { draftDims, writeDrafterSafetensors } from '../train/safetensors.js';
import { parse, type Opt } from './argparse.js';
import type { ScriptIO } from './prepare.js';
import { readState, resolveCheckpoint } from './train.js';

const EXPORT_OPTIONS: Opt[] = [
  { flag: '--to', kind: 'str', required: true, choices: ['hf', 'sglang'] },
  { flag: '--checkpoint', kind: 'str', required: true },
  { flag: '--draft-config', kind: 'str', required: true },
  { flag: '--output-dir', kind: 'str', required: true },
  { flag: '--vocab-mapping', kind: 'str' },
  { flag: '--embedding-source', kind: 'str' },
  { flag: '--embedding-key', kind: 'str', default: 'model.embed_tokens.weight' },
];

export async function runSpecforgeExport(argv: string[], io: ScriptIO): Promise<number> {
  const parsed = parse('specforge export', EXPORT_OPTIONS, argv);
  if (parsed.kind === 'help') return io.out(parsed.text), 0;
  if (parsed.kind === 'error') return io.err(parsed.text), 2;
  const a = parsed.args;
  if (a.to === 'sglang' && a.embedding_source !== null) {
    return io.err('usage: specforge export ...\nspecforge: error: --embedding-source is only valid with --to hf\n'), 2;
  }
  let state;
  let cfg: Record<string, unknown>;
  try {
    state = await readState(await resolveCheckpoint(String(a.checkpoint)));
    cfg = JSON.parse(await fs.readFile(String(a.draft_config), 'utf8')) as Record<string, unknown>;
  } catch (e) {
    io.err(`Traceback (most recent call last):\n  File "/usr/local/bin/specforge", line 8, in <module>\n${(e as Error).message}\n`);
    return 1;
  }
  const out = String(a.output_dir);
  await fs.mkdir(out, { recursive: true });
  const { aerie_sim: _old, ...rest } = cfg;
  const config = {
    ...rest,
    architectures: ['LlamaForCausalLMEagle3'],
    torch_dtype: 'bfloat16',
    aerie_sim: { accept_length: state.aerie_sim.accept_length, trained_sample_epochs: state.aerie_sim.trained_sample_epochs },
  };
  await writeDrafterSafetensors(path.join(out, 'model.safetensors'), draftDims(cfg));
  await fs.writeFile(path.join(out, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  io.out(`Exported ${a.checkpoint} (step ${state.global_step}) to ${out} for ${a.to}\n`);
  return 0;
}
