/**
 * `aerie-sim prepare-hidden-states <flags>`: stands in for
 * `torchrun ... scripts/prepare_hidden_states.py` of SpecForge v0.2. Same flags, the same
 * layout — `<output-path>/rows_{k*G}-{(k+1)*G}/data_{idx}.ckpt[.gz]`, G = --file-group-size —
 * and the same hazards: files are written in place (not atomically), a file that exists is
 * skipped on a rerun (so a file truncated by a crash is kept), and a record whose states
 * contain NaN is dropped without a word.
 *
 * Tokens per record: the whitespace words of the conversation's turns, plus one per turn,
 * capped at --max-length (the simulator has no tokenizer).
 *
 * Environment: AERIE_SIM_TIME_SCALE (1 = 50 ms a record after a 10 s start-up);
 * AERIE_SIM_PREPARE_CRASH_AT=N crashes after N records written in this run, leaving the next
 * file half-written; AERIE_SIM_PREPARE_NAN_EVERY=K drops every K-th record (idx % K == K-1);
 * AERIE_SIM_FAULT_ONCE=<path> makes the crash one-shot.
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { claimFault, torchrunSummary } from '../train/faults.js';
import { formatMeter } from '../train/tqdm.js';
import { parse, type Opt } from './argparse.js';
import { hiddenStateEntries, planZip, writeZip } from './torch-zip.js';

const PROG = 'prepare_hidden_states.py';
const SCRIPT = 'scripts/prepare_hidden_states.py';

export const PREPARE_OPTIONS: Opt[] = [
  { flag: '--target-model-path', kind: 'str', required: true },
  { flag: '--draft-model-config', kind: 'str' },
  { flag: '--data-path', kind: 'str', required: true },
  { flag: '--output-path', kind: 'str', default: './cache/hidden_states' },
  { flag: '--cache-dir', kind: 'str', default: './cache' },
  { flag: '--chat-template', kind: 'str', default: 'llama3' },
  { flag: '--is-preformatted', kind: 'flag' },
  { flag: '--max-length', kind: 'int', default: 2048 },
  { flag: '--num-samples', kind: 'int' },
  { flag: '--tp-size', kind: 'int', default: 1 },
  { flag: '--batch-size', kind: 'int', default: 32 },
  { flag: '--compress', kind: 'flag' },
  { flag: '--file-group-size', kind: 'int', default: 2000 },
  { flag: '--build-dataset-num-proc', kind: 'int', default: 8 },
  { flag: '--sglang-mem-fraction-static', kind: 'float', default: 0.4 },
  { flag: '--sglang-attention-backend', kind: 'str', default: 'flashinfer' },
  { flag: '--dist-timeout', kind: 'int', default: 20 },
  { flag: '--aux-hidden-states-layers', kind: 'str' },
];

export interface ScriptIO {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
}

const processIO: ScriptIO = { out: (t) => void process.stdout.write(t), err: (t) => void process.stderr.write(t), env: process.env };
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function traceback(lines: [string, number, string, string][], exception: string): string {
  const out = ['Traceback (most recent call last):'];
  for (const [file, line, fn, code] of lines) out.push(`  File "${file}", line ${line}, in ${fn}`, `    ${code}`);
  out.push(exception);
  return `${out.map((l) => `[rank0]: ${l}`).join('\n')}\n`;
}

/** Tokens the simulator assigns a conversation row. */
export function recordTokens(row: unknown, maxLength: number): number {
  const convs = (row as { conversations?: unknown[] })?.conversations;
  if (!Array.isArray(convs)) return 1;
  let words = 0;
  for (const t of convs) {
    const r = t as { content?: unknown; value?: unknown };
    const text = typeof r.content === 'string' ? r.content : typeof r.value === 'string' ? r.value : '';
    words += text.split(/\s+/).filter(Boolean).length + 1;
  }
  return Math.max(1, Math.min(maxLength, words));
}

export function groupDir(idx: number, group: number): string {
  const k = Math.floor(idx / group);
  return `rows_${k * group}-${(k + 1) * group}`;
}

export async function runPrepare(argv: string[], io: ScriptIO = processIO): Promise<number> {
  const parsed = parse(PROG, PREPARE_OPTIONS, argv);
  if (parsed.kind === 'help') return io.out(parsed.text), 0;
  if (parsed.kind === 'error') return io.err(parsed.text), 2;
  const a = parsed.args;
  const scale = Math.max(0, Number(io.env.AERIE_SIM_TIME_SCALE ?? '1')) || 0;
  const fail = (text: string): number => (io.err(text + torchrunSummary(1, new Date(), SCRIPT)), 1);
  const onTerm = (): void => {
    io.err(`W0000 00:00:00.000000 ${process.pid} torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers\n`);
    process.exit(143);
  };
  process.on('SIGTERM', onTerm);

  const target = String(a.target_model_path);
  let cfg: { hidden_size?: number; num_hidden_layers?: number };
  try {
    cfg = JSON.parse(await fs.readFile(path.join(target, 'config.json'), 'utf8')) as typeof cfg;
  } catch {
    return fail(traceback([[SCRIPT, 301, '<module>', 'main()'], [SCRIPT, 262, 'main', 'tokenizer = AutoTokenizer.from_pretrained(args.target_model_path)']],
      `OSError: Incorrect path_or_model_id: '${target}'. Please provide either the path to a local folder or the repo_id of a model on the Hub.`));
  }
  const hidden = Number(cfg.hidden_size);
  const layers = Number(cfg.num_hidden_layers);
  let text: string;
  try {
    text = await fs.readFile(String(a.data_path), 'utf8');
  } catch {
    return fail(traceback([[SCRIPT, 301, '<module>', 'main()'], [SCRIPT, 255, 'main', 'assert os.path.exists(']], `AssertionError: Dataset path ${a.data_path} does not exist`));
  }
  const rows: unknown[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.trim()) continue;
    try {
      rows.push(JSON.parse(lines[i]!));
    } catch {
      return fail(traceback([[SCRIPT, 301, '<module>', 'main()'], [SCRIPT, 257, 'main', 'dataset = load_dataset("json", data_files=args.data_path)["train"]']],
        `datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset (JSON parse error in ${path.basename(String(a.data_path))} at line ${i + 1})`));
    }
  }
  const n = a.num_samples === null ? rows.length : Math.min(rows.length, Number(a.num_samples));
  const maxLength = Number(a.max_length);
  const group = Number(a.file_group_size);
  const outRoot = String(a.output_path);
  const ext = a.compress ? '.ckpt.gz' : '.ckpt';
  const aux = [1, Math.floor(layers / 2) - 1, layers - 4];

  io.out(`rank 0: Built dataset\n`);
  io.out(`rank 0: Capturing Aux hidden states layers: [${aux.join(', ')}], num_layers: ${layers}\n`);
  await sleep(10_000 * scale);

  const crashAt = Number(io.env.AERIE_SIM_PREPARE_CRASH_AT);
  const nanEvery = Number(io.env.AERIE_SIM_PREPARE_NAN_EVERY);
  const faults = { oncePath: io.env.AERIE_SIM_FAULT_ONCE || undefined, oom: false };
  const started = Date.now();
  let written = 0;
  let skipped = 0;
  for (let idx = 0; idx < n; idx++) {
    if (idx % Math.max(1, Number(a.batch_size)) === 0 || idx === n - 1) {
      io.err(`\r${formatMeter({ desc: '', n: idx, total: n, elapsedS: (Date.now() - started) / 1000 }).replace(/^: /, '')}`);
    }
    const dir = path.join(outRoot, groupDir(idx, group));
    const file = path.join(dir, `data_${idx}${ext}`);
    if (existsSync(file)) {
      skipped++;
      continue;
    }
    if (Number.isInteger(nanEvery) && nanEvery > 0 && idx % nanEvery === nanEvery - 1) continue;
    await fs.mkdir(dir, { recursive: true });
    const entries = hiddenStateEntries(`data_${idx}`, recordTokens(rows[idx], maxLength), hidden);
    if (Number.isInteger(crashAt) && crashAt >= 0 && written === crashAt && claimFault(faults)) {
      await writeZip(file, entries, Math.floor(planZip(entries).size / 2));
      io.err('\n');
      return fail(traceback([[SCRIPT, 301, '<module>', 'main()'], [SCRIPT, 290, 'main', 'hidden_states_generator.generate(eagle3_dataset)'], [SCRIPT, 214, '_save_tensor', 'torch.save(data_point, output_file)']],
        'RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 41943104 vs 41943040'));
    }
    if (a.compress) {
      const tmp = `${file}.zip`;
      await writeZip(tmp, entries);
      await fs.writeFile(file, gzipSync(await fs.readFile(tmp)));
      await fs.rm(tmp);
    } else await writeZip(file, entries);
    written++;
    await sleep(50 * scale);
  }
  io.err(`\r${formatMeter({ desc: '', n, total: n, elapsedS: (Date.now() - started) / 1000 }).replace(/^: /, '')}\n`);
  io.out(`rank 0: Saved ${written} hidden-state files to ${outRoot} (${skipped} existed already)\n`);
  process.off('SIGTERM', onTerm);
  return 0;
}
