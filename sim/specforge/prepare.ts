/**
 * `aerie-sim prepare-hidden-states <flags>`: stands in for
 * `torchrun ... scripts/prepare_hidden_states.py` of the SpecForge revision named by
 * AERIE_SIM_SPECFORGE_REVISION (revision.ts; v0.2.0 when unset). Each profile imitates one
 * commit's flags exactly (anything else: argparse's exit 2): v0.2.0 → 73e6f808,
 * v0.2-final-save → 03a3dedb, v0.2-resume → 20e2e3f0, cli → a6b6b023. The layout —
 * `<output-path>/rows_{k*G}-{(k+1)*G}/data_{idx}.ckpt[.gz]`, G = --file-group-size — and the
 * hazards are the real script's: files are written in place (not atomically), a file that
 * exists is skipped on a rerun (so a file truncated by a crash is kept), a record whose states
 * contain NaN is dropped with only a warning, the rows are shuffled before they are numbered
 * (so data_i is not row i; the simulator's permutation is its own, not numpy's), and the last
 * partial batch is dropped (drop_last=True). From ca949555 (the cli profile here) it also
 * writes `<output-path>/vocab_mapping/vocab_mapping.pt` before the states.
 *
 * Tokens per record: one per turn plus the turn's whitespace words, capped at --max-length
 * (the simulator has no tokenizer); ids hash the words, loss_mask is 1 on assistant turns.
 *
 * Environment: AERIE_SIM_TIME_SCALE (1 = 50 ms a record after a 10 s start-up);
 * AERIE_SIM_PREPARE_CRASH_AT=N crashes after N records written in this run, leaving the next
 * file half-written; AERIE_SIM_PREPARE_NAN_EVERY=K drops every K-th file (idx % K == K-1);
 * AERIE_SIM_FAULT_ONCE=<path> makes the crash one-shot.
 */
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { claimFault, torchrunSummary } from '../train/faults.js';
import { formatMeter } from '../train/tqdm.js';
import { parse, type Opt } from './argparse.js';
import { simSpecforgeRevision, type SimSpecforgeRevision } from './revision.js';
import { hiddenStateEntries, planZip, torchSaveEntries, writeZip } from './torch-zip.js';

const PROG = 'prepare_hidden_states.py';
const SCRIPT = 'scripts/prepare_hidden_states.py';

/** Flags every imitated revision has (SpecForge@73e6f808:scripts/prepare_hidden_states.py:76-134 and specforge/args.py:94-163; @a6b6b023:…:103-195). */
const COMMON: Opt[] = [
  { flag: '--target-model-path', kind: 'str', required: true },
  { flag: '--data-path', kind: 'str', required: true },
  { flag: '--max-length', kind: 'int', default: 2048 },
  { flag: '--chat-template', kind: 'str', default: 'llama3' },
  { flag: '--is-preformatted', kind: 'flag' },
  { flag: '--num-samples', kind: 'int' },
  { flag: '--build-dataset-num-proc', kind: 'int', default: 8 },
  { flag: '--tp-size', kind: 'int', default: 1 },
  { flag: '--batch-size', kind: 'int', default: 32 },
  { flag: '--cache-dir', kind: 'str', default: './cache' },
  { flag: '--output-path', kind: 'str' },
  { flag: '--dist-timeout', kind: 'int', default: 2000 },
  { flag: '--num-io-threads', kind: 'int' },
  { flag: '--num-workers', kind: 'int', default: 4 },
  { flag: '--io-queue-size', kind: 'int', default: 50 },
  { flag: '--file-group-size', kind: 'int', default: 2000 },
  { flag: '--sglang-attention-backend', kind: 'str', default: 'flashinfer' },
  { flag: '--sglang-mem-fraction-static', kind: 'float', default: 0.4 },
  { flag: '--sglang-context-length', kind: 'int' },
  { flag: '--sglang-enable-nccl-nvls', kind: 'flag' },
  { flag: '--sglang-enable-symm-mem', kind: 'flag' },
  { flag: '--sglang-enable-torch-compile', kind: 'flag' },
  { flag: '--sglang-enable-dp-attention', kind: 'flag' },
  { flag: '--sglang-enable-dp-lm-head', kind: 'flag' },
  { flag: '--sglang-ep-size', kind: 'int', default: 1 },
];

/** v0.2's model flags: SpecForge@73e6f808:scripts/prepare_hidden_states.py:78-81,102-107. */
const V02: Opt[] = [
  { flag: '--is-vlm', kind: 'flag' },
  { flag: '--enable-aux-hidden-states', kind: 'flag' },
  { flag: '--aux-hidden-states-layers', kind: 'str' },
  { flag: '--model-download-dir', kind: 'str' },
];
/** SpecForge@73e6f808:specforge/args.py (gone by 20e2e3f0); nargs="+" is taken as one value here. */
const PIECEWISE: Opt[] = [
  { flag: '--sglang-enable-piecewise-cuda-graph', kind: 'flag' },
  { flag: '--sglang-piecewise-cuda-graph-max-tokens', kind: 'int', default: 4096 },
  { flag: '--sglang-piecewise-cuda-graph-tokens', kind: 'str' },
];
/** From SpecForge@7c7ef547 (--compress at :147) and 20e2e3f0's --trust-remote-code (:84-88). */
const COMPRESS: Opt[] = [
  { flag: '--trust-remote-code', kind: 'flag' },
  { flag: '--compress', kind: 'flag' },
  { flag: '--compression-level', kind: 'int', default: 6 },
];
/** SpecForge@a6b6b023:scripts/prepare_hidden_states.py:104-118. */
const CLI: Opt[] = [
  { flag: '--strategy', kind: 'str', default: 'eagle3' },
  { flag: '--draft-model-config', kind: 'str' },
];

export function prepareOptions(rev: SimSpecforgeRevision): Opt[] {
  switch (rev) {
    case 'v0.2.0':
    case 'v0.2-final-save':
      return [...COMMON, ...V02, ...PIECEWISE];
    case 'v0.2-resume':
      return [...COMMON, ...V02, ...COMPRESS];
    case 'cli':
      return [...COMMON, ...CLI, ...COMPRESS];
  }
}

export interface ScriptIO {
  out(text: string): void;
  err(text: string): void;
  env: NodeJS.ProcessEnv;
}

const processIO: ScriptIO = {
  out: (t) => void process.stdout.write(t),
  err: (t) => void process.stderr.write(t),
  env: process.env,
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function traceback(lines: [string, number, string, string][], exception: string): string {
  const out = ['Traceback (most recent call last):'];
  for (const [file, line, fn, code] of lines) out.push(`  File "${file}", line ${line}, in ${fn}`, `    ${code}`);
  out.push(exception);
  return `${out.map((l) => `[rank0]: ${l}`).join('\n')}\n`;
}

/** The tokens the simulator gives a conversation row: ids and the assistant-turn loss mask. */
export function recordTokens(row: unknown, maxLength: number): { ids: number[]; mask: number[] } {
  const convs = (row as { conversations?: unknown[] })?.conversations;
  const ids: number[] = [];
  const mask: number[] = [];
  const hash = (w: string): number => {
    let h = 2166136261;
    for (let i = 0; i < w.length; i++) h = Math.imul(h ^ w.charCodeAt(i), 16777619);
    return (h >>> 0) % 32000;
  };
  for (const t of Array.isArray(convs) ? convs : []) {
    const r = t as { content?: unknown; value?: unknown; role?: unknown; from?: unknown };
    const text = typeof r.content === 'string' ? r.content : typeof r.value === 'string' ? r.value : '';
    const role = String(r.role ?? r.from ?? '');
    const assistant = role === 'assistant' || role === 'gpt';
    for (const w of [`<${role}>`, ...text.split(/\s+/).filter(Boolean)]) {
      ids.push(hash(w));
      mask.push(assistant ? 1 : 0);
    }
  }
  if (ids.length === 0) return { ids: [0], mask: [0] };
  return { ids: ids.slice(0, maxLength), mask: mask.slice(0, maxLength) };
}

export function groupDir(idx: number, group: number): string {
  const k = Math.floor(idx / group);
  return `rows_${k * group}-${(k + 1) * group}`;
}

/**
 * The order rows are numbered in. The real script calls `dataset.shuffle(seed=42)`
 * (SpecForge@a6b6b023:specforge/data/preprocessing.py:232): numpy's permutation, which this
 * one is not; it only has to be a fixed shuffle, so that data_i is not row i here either.
 */
export function shuffledRows(n: number, seed = 42): number[] {
  const order = Array.from({ length: n }, (_, i) => i);
  let x = seed >>> 0;
  const rand = (): number => {
    x = (x + 0x6d2b79f5) >>> 0;
    let t = Math.imul(x ^ (x >>> 15), 1 | x);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

type Frames = [string, number, string, string][];

/**
 * The draft vocab size from --draft-model-config, failing as SpecForge@a6b6b023's
 * `_resolve_draft_vocab_size` does (scripts/prepare_hidden_states.py:199-226, called at :778
 * even when the flag is absent).
 */
async function draftVocab(source: string | null): Promise<{ ok: number } | { err: [Frames, string] }> {
  const at: Frames = [
    [SCRIPT, 937, '<module>', 'main()'],
    [SCRIPT, 778, 'main', 'draft_vocab_size = _resolve_draft_vocab_size(args.draft_model_config)'],
  ];
  if (source === null)
    return {
      err: [
        [...at, [SCRIPT, 202, '_resolve_draft_vocab_size', 'expanded = Path(source).expanduser()']],
        'TypeError: expected str, bytes or os.PathLike object, not NoneType',
      ],
    };
  const here: Frames = [...at, [SCRIPT, 204, '_resolve_draft_vocab_size', 'raise FileNotFoundError(']];
  let payload: { draft_vocab_size?: unknown; vocab_size?: unknown };
  try {
    if (!(await fs.stat(source)).isFile()) throw new Error('not a file');
    payload = JSON.parse(await fs.readFile(source, 'utf8')) as typeof payload;
  } catch {
    return {
      err: [here, `FileNotFoundError: --draft-model-config must point to an existing local JSON file: ${source}`],
    };
  }
  const v = payload.draft_vocab_size ?? payload.vocab_size;
  if (typeof v !== 'number' || !Number.isInteger(v) || v <= 0) {
    return {
      err: [
        [...at, [SCRIPT, 222, '_resolve_draft_vocab_size', 'raise ValueError(']],
        `ValueError: draft model config '${source}' must define a positive draft_vocab_size (or vocab_size fallback), got ${JSON.stringify(v ?? null)}`,
      ],
    };
  }
  return { ok: v };
}

/**
 * `d2t` int64 [Vd] and `t2d` bool [V], the keys SpecForge@a6b6b023:specforge/data/preprocessing.py:627-638
 * saves (d2t[i] = target id − i): the simulator keeps the first Vd target ids. Written under a
 * temp name in the folder and renamed into place, as scripts/prepare_hidden_states.py:238-273 does.
 */
async function writeVocabMapping(outRoot: string, draft: number, target: number): Promise<string> {
  const dir = path.join(outRoot, 'vocab_mapping');
  await fs.mkdir(dir, { recursive: true });
  const key = `.vocab_mapping.${process.pid.toString(16)}${Date.now().toString(16)}`;
  const tmp = path.join(dir, `${key}.pt`);
  const t2d = Buffer.alloc(target);
  t2d.fill(1, 0, draft);
  await writeZip(
    tmp,
    torchSaveEntries(key, [
      { key: 'd2t', dtype: 'int64', shape: [draft] },
      { key: 't2d', dtype: 'bool', shape: [target], data: t2d },
    ]),
  );
  const final = path.join(dir, 'vocab_mapping.pt');
  await fs.rename(tmp, final);
  return final;
}

export async function runPrepare(argv: string[], io: ScriptIO = processIO): Promise<number> {
  const rev = simSpecforgeRevision(io.env);
  const parsed = parse(PROG, prepareOptions(rev), argv);
  if (parsed.kind === 'help') return (io.out(parsed.text), 0);
  if (parsed.kind === 'error') return (io.err(parsed.text), 2);
  const a = parsed.args;
  const scale = Math.max(0, Number(io.env.AERIE_SIM_TIME_SCALE ?? '1')) || 0;
  const fail = (text: string): number => (io.err(text + torchrunSummary(1, new Date(), SCRIPT)), 1);
  const onTerm = (): void => {
    io.err(
      `W0000 00:00:00.000000 ${process.pid} torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGTERM death signal, shutting down workers\n`,
    );
    process.exit(143);
  };
  process.on('SIGTERM', onTerm);

  const target = String(a.target_model_path);
  let cfg: { hidden_size?: number; num_hidden_layers?: number; vocab_size?: number };
  try {
    cfg = JSON.parse(await fs.readFile(path.join(target, 'config.json'), 'utf8')) as typeof cfg;
  } catch {
    return fail(
      traceback(
        [
          [SCRIPT, 301, '<module>', 'main()'],
          [SCRIPT, 262, 'main', 'tokenizer = AutoTokenizer.from_pretrained(args.target_model_path)'],
        ],
        `OSError: Incorrect path_or_model_id: '${target}'. Please provide either the path to a local folder or the repo_id of a model on the Hub.`,
      ),
    );
  }
  const hidden = Number(cfg.hidden_size);
  const layers = Number(cfg.num_hidden_layers);
  let draftVocabSize = 0;
  if (rev === 'cli') {
    const d = await draftVocab(a.draft_model_config === null ? null : String(a.draft_model_config));
    if ('err' in d) return fail(traceback(...d.err));
    draftVocabSize = d.ok;
  }
  let text: string;
  try {
    text = await fs.readFile(String(a.data_path), 'utf8');
  } catch {
    return fail(
      traceback(
        [
          [SCRIPT, 301, '<module>', 'main()'],
          [SCRIPT, 255, 'main', 'assert os.path.exists('],
        ],
        `AssertionError: Dataset path ${a.data_path} does not exist`,
      ),
    );
  }
  const rows: unknown[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (!lines[i]!.trim()) continue;
    try {
      rows.push(JSON.parse(lines[i]!));
    } catch {
      return fail(
        traceback(
          [
            [SCRIPT, 301, '<module>', 'main()'],
            [SCRIPT, 257, 'main', 'dataset = load_dataset("json", data_files=args.data_path)["train"]'],
          ],
          `datasets.exceptions.DatasetGenerationError: An error occurred while generating the dataset (JSON parse error in ${path.basename(String(a.data_path))} at line ${i + 1})`,
        ),
      );
    }
  }
  // --num-samples selects the first rows, then the dataset is shuffled (SpecForge@a6b6b023:scripts/prepare_hidden_states.py:831-832 before build_eagle3_dataset shuffles).
  const n = a.num_samples === null ? rows.length : Math.min(rows.length, Number(a.num_samples));
  const order = shuffledRows(n);
  const batch = Math.max(1, Number(a.batch_size));
  // One data-parallel rank: its DataLoader's drop_last=True (SpecForge@a6b6b023:specforge/data/utils.py:240) drops the partial tail.
  const files = Math.floor(n / batch) * batch;
  const maxLength = Number(a.max_length);
  const group = Number(a.file_group_size);
  const outRoot = a.output_path === null ? path.resolve('cache', 'hidden_states') : String(a.output_path);
  const ext = a.compress ? '.ckpt.gz' : '.ckpt';
  const aux = [1, Math.floor(layers / 2) - 1, layers - 4];

  io.out(`rank 0: Dataset prepared with ${n} samples.\n`);
  if (rev === 'cli') {
    if (draftVocabSize > Number(cfg.vocab_size)) {
      return fail(
        traceback(
          [
            [SCRIPT, 937, '<module>', 'main()'],
            [SCRIPT, 804, 'main', 'raise ValueError('],
          ],
          `ValueError: draft_vocab_size=${draftVocabSize} exceeds target vocab_size=${cfg.vocab_size}`,
        ),
      );
    }
    io.out(`Vocabulary mapping ready at ${await writeVocabMapping(outRoot, draftVocabSize, Number(cfg.vocab_size))}\n`);
  }
  io.out(`rank 0: Capturing Aux hidden states layers: [${aux.join(', ')}], num_layers: ${layers}\n`);
  io.out(`rank 0: DP Rank 0 will process ${n} samples, starting from index 0\n`);
  await sleep(10_000 * scale);

  const crashAt = Number(io.env.AERIE_SIM_PREPARE_CRASH_AT);
  const nanEvery = Number(io.env.AERIE_SIM_PREPARE_NAN_EVERY);
  const faults = { oncePath: io.env.AERIE_SIM_FAULT_ONCE || undefined, oom: false };
  const started = Date.now();
  let written = 0;
  let skipped = 0;
  for (let idx = 0; idx < files; idx++) {
    if (idx % batch === 0 || idx === files - 1) {
      io.err(
        `\r${formatMeter({ desc: 'Generating Hidden States', n: Math.floor(idx / batch), total: files / batch, elapsedS: (Date.now() - started) / 1000 })}`,
      );
    }
    const dir = path.join(outRoot, groupDir(idx, group));
    const file = path.join(dir, `data_${idx}${ext}`);
    if (existsSync(file)) {
      skipped++;
      continue;
    }
    if (Number.isInteger(nanEvery) && nanEvery > 0 && idx % nanEvery === nanEvery - 1) {
      io.out(`Warning: NaN found in aux_hidden_state for ${file}. Skipping save.\n`);
      continue;
    }
    await fs.mkdir(dir, { recursive: true });
    const t = recordTokens(rows[order[idx]!], maxLength);
    const values = { inputIds: t.ids, lossMask: t.mask, order: rev === 'cli' ? ('cli' as const) : ('v0.2' as const) };
    // torch names the archive after the file when saving to a path, "archive" through gzip.open.
    const entries = hiddenStateEntries(a.compress ? 'archive' : `data_${idx}`, t.ids.length, hidden, values);
    if (Number.isInteger(crashAt) && crashAt >= 0 && written === crashAt && claimFault(faults)) {
      await writeZip(file, entries, Math.floor(planZip(entries).size / 2));
      io.err('\n');
      return fail(
        traceback(
          [
            [SCRIPT, 301, '<module>', 'main()'],
            [SCRIPT, 290, 'main', 'hidden_states_generator.generate(eagle3_dataset)'],
            [SCRIPT, 214, '_save_tensor', 'torch.save(data_point, output_file)'],
          ],
          'RuntimeError: [enforce fail at inline_container.cc:603] . unexpected pos 41943104 vs 41943040',
        ),
      );
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
  io.err(
    `\r${formatMeter({ desc: 'Generating Hidden States', n: files / batch, total: files / batch, elapsedS: (Date.now() - started) / 1000 })}\n`,
  );
  // SpecForge@a6b6b023:scripts/prepare_hidden_states.py:756-758.
  io.out(`\nGeneration loop finished. Processed: ${written}, Skipped: ${skipped}\n`);
  process.off('SIGTERM', onTerm);
  return 0;
}
