/**
 * `aerie-sim specforge export --to sglang --checkpoint <path> --draft-config <cfg> --output-dir <out>`:
 * turns a training checkpoint into a drafter SGLang can serve, as HEAD's exporter does
 * (SpecForge@a6b6b023:specforge/export/to_sglang.py:57-88): config.json (architectures
 * LlamaForCausalLMEagle3, the draft vocab, plus the training the simulator records) and
 * model.safetensors with midlayer.*, fc, norm, lm_head, d2t and t2d, embeddings dropped.
 * Through `specforge export` it prints nothing on success: cli.py:283-295 returns 0 without
 * the "exported sglang draft to …" line that only to_sglang.py's own main prints (:104).
 */
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { draftDims, writeDrafterSafetensors } from '../train/safetensors.js';
import { parse, type Opt } from './argparse.js';
import { resolveExportState } from './checkpoint.js';
import type { ScriptIO } from './prepare.js';

// SpecForge@a6b6b023:specforge/cli.py:199-212
const EXPORT_OPTIONS: Opt[] = [
  { flag: '--to', kind: 'str', required: true, choices: ['hf', 'sglang'] },
  { flag: '--checkpoint', kind: 'str', required: true },
  { flag: '--draft-config', kind: 'str', required: true },
  { flag: '--output-dir', kind: 'str', required: true },
  { flag: '--vocab-mapping', kind: 'str' },
  { flag: '--embedding-source', kind: 'str' },
  { flag: '--embedding-key', kind: 'str', default: 'model.embed_tokens.weight' },
];

const traceback = (message: string): string =>
  `Traceback (most recent call last):\n  File "/usr/local/bin/specforge", line 8, in <module>\n${message}\n`;

export async function runSpecforgeExport(argv: string[], io: ScriptIO): Promise<number> {
  const parsed = parse('specforge export', EXPORT_OPTIONS, argv);
  if (parsed.kind === 'help') return (io.out(parsed.text), 0);
  if (parsed.kind === 'error') return (io.err(parsed.text), 2);
  const a = parsed.args;
  if (a.to === 'sglang' && a.embedding_source !== null) {
    // parser.error, after parsing (cli.py:291-292)
    return (
      io.err(
        'usage: specforge [-h] {train,export,benchmark} ...\nspecforge: error: --embedding-source is only valid with --to hf\n',
      ),
      2
    );
  }
  let state;
  let cfg: Record<string, unknown>;
  try {
    state = await resolveExportState(String(a.checkpoint));
    // to_sglang.py:72-77: only EAGLE3 checkpoints have an SGLang exporter.
    if (a.to === 'sglang' && state.strategy !== 'eagle3') {
      throw new Error(
        `ValueError: the specialized SGLang exporter currently supports EAGLE3 checkpoints only, got strategy='${state.strategy}'; use --to hf for DFlash-family and P-EAGLE draft model directories`,
      );
    }
    cfg = JSON.parse(await fs.readFile(String(a.draft_config), 'utf8')) as Record<string, unknown>;
  } catch (e) {
    return (io.err(traceback((e as Error).message)), 1);
  }
  // AutoDraftModelConfig.from_file (modeling/auto.py:90-92), the one print on this path.
  if ('tie_word_embeddings' in cfg) io.out('Set draft model tie_word_embeddings to False\n');
  const out = String(a.output_dir);
  await fs.mkdir(out, { recursive: true });
  const { aerie_sim: _old, ...rest } = cfg;
  const config = {
    ...rest,
    architectures: ['LlamaForCausalLMEagle3'],
    tie_word_embeddings: false,
    torch_dtype: 'bfloat16',
    aerie_sim: {
      accept_length: state.aerie_sim.accept_length,
      trained_sample_epochs: state.aerie_sim.trained_sample_epochs,
    },
  };
  await writeDrafterSafetensors(path.join(out, 'model.safetensors'), draftDims(cfg));
  await fs.writeFile(path.join(out, 'config.json'), `${JSON.stringify(config, null, 2)}\n`);
  return 0;
}
