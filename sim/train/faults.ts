/**
 * Injected trainer failures and the text they leave in the log, shaped like a torchrun job
 * dying: the rank's Python traceback (prefixed `[rank0]:` as PyTorch 2.x does), then
 * torchrun's ChildFailedError summary.
 *
 *   AERIE_SIM_TRAIN_CRASH_AT_STEP=N   crash when the trainer reaches its global step N
 *   AERIE_SIM_TRAIN_CRASH_IN_SAVE=N   crash while saving the checkpoint of global step N (weights cut short)
 *   AERIE_SIM_FAULT=train-oom         torch.OutOfMemoryError on the first training step
 *   AERIE_SIM_FAULT_ONCE=<path>       any of the above fires only if <path> is absent, and creates it
 */
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const SCRIPT = 'scripts/train_eagle3.py';

export interface FaultPlan {
  crashAtStep?: number;
  crashInSaveAt?: number;
  oom: boolean;
  oncePath?: string;
}

export function faultPlan(env: NodeJS.ProcessEnv): FaultPlan {
  const n = Number(env.AERIE_SIM_TRAIN_CRASH_AT_STEP);
  const inSave = Number(env.AERIE_SIM_TRAIN_CRASH_IN_SAVE);
  const faults = (env.AERIE_SIM_FAULT ?? '').split(',').map((s) => s.trim());
  return {
    crashAtStep: Number.isInteger(n) && n > 0 ? n : undefined,
    crashInSaveAt: Number.isInteger(inSave) && inSave > 0 ? inSave : undefined,
    oom: faults.includes('train-oom'),
    oncePath: env.AERIE_SIM_FAULT_ONCE || undefined,
  };
}

/** Called only at the moment a fault would fire: false if its one-shot marker already exists. */
export function claimFault(plan: FaultPlan): boolean {
  if (!plan.oncePath) return true;
  if (existsSync(plan.oncePath)) return false;
  mkdirSync(path.dirname(plan.oncePath), { recursive: true });
  writeFileSync(plan.oncePath, `fired by aerie-sim train pid ${process.pid} at ${new Date().toISOString()}\n`);
  return true;
}

type Frame = [line: number, fn: string, code: string];

function rankTraceback(frames: Frame[], library: [string, number, string, string][], exception: string[]): string {
  const out = ['Traceback (most recent call last):'];
  for (const [line, fn, code] of frames) out.push(`  File "${SCRIPT}", line ${line}, in ${fn}`, `    ${code}`);
  for (const [file, line, fn, code] of library) out.push(`  File "${file}", line ${line}, in ${fn}`, `    ${code}`);
  out.push(...exception);
  return `${out.map((l) => `[rank0]: ${l}`).join('\n')}\n`;
}

function stamp(d: Date): string {
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  return `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())}_${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`;
}

/**
 * torchrun's report after workers exited non-zero: one ChildFailedError naming every failed
 * rank, the first (root cause) apart (torch 2.13 torch/distributed/elastic/multiprocessing/errors/__init__.py:184-202,
 * launcher/api.py:383-386). `entrypoint` is the script, or the module after `--module`
 * (launcher/api.py:202-219). The root cause is the first rank observed failing; the sim takes
 * the first of `failed`.
 */
export function torchrunFailures(
  failed: { rank: number; exitcode: number }[],
  now = new Date(),
  entrypoint = SCRIPT,
): string {
  const pid = (rank: number): number => process.pid + 1 + rank;
  const entry = (idx: number, f: { rank: number; exitcode: number }): string[] => [
    `[${idx}]:`,
    `  time      : ${stamp(now)}`,
    '  host      : aerie-sim',
    `  rank      : ${f.rank} (local_rank: ${f.rank})`,
    `  exitcode  : ${f.exitcode} (pid: ${pid(f.rank)}) `,
    '  error_file: <N/A>',
    '  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html',
  ];
  const [root, ...others] = failed;
  const T = '/usr/local/lib/python3.11/dist-packages/torch/distributed';
  const module = !entrypoint.endsWith('.py');
  // `python -m torch.distributed.run … --module M`, as HEAD's CLI starts it: the frames and
  // log lines a real two-rank refusal printed (test/fixtures/real/specforge-a6b6b023-cpu-ws2/grow-resume.log).
  const launcher = module
    ? [
        '  File "<frozen runpy>", line 198, in _run_module_as_main',
        '  File "<frozen runpy>", line 88, in _run_code',
        `  File "${T}/run.py", line 1032, in <module>`,
        '    main()',
        `  File "${T}/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper`,
        '    return f(*args, **kwargs)',
        '           ^^^^^^^^^^^^^^^^^^',
        `  File "${T}/run.py", line 1028, in main`,
        '    run(args)',
        `  File "${T}/run.py", line 1019, in run`,
        '    elastic_launch(',
        `  File "${T}/launcher/api.py", line 194, in __call__`,
        '    return launch_agent(',
        '           ^^^^^^^^^^^^^',
      ]
    : [
        '  File "/usr/local/bin/torchrun", line 8, in <module>',
        '    sys.exit(main())',
        `  File "${T}/run.py", line 1028, in main`,
        '    run(args)',
      ];
  const p = (n: number, w = 2): string => String(n).padStart(w, '0');
  const glog = (level: string, line: number): string =>
    `${level}${p(now.getUTCMonth() + 1)}${p(now.getUTCDate())} ${p(now.getUTCHours())}:${p(now.getUTCMinutes())}:${p(now.getUTCSeconds())}.${p(now.getUTCMilliseconds(), 3)}000 ${process.pid} ${T.slice(1)}/elastic/multiprocessing/api.py:${line}]`;
  return [
    // The agent stops the ranks still running when it sees the first failure (api.py:1028).
    ...others.map((f) => `${glog('W', 1028)} Sending process ${pid(f.rank)} closing signal SIGTERM`),
    `${glog('E', 1002)} failed (exitcode: ${root!.exitcode}) local_rank: ${root!.rank} (pid: ${pid(root!.rank)}) of binary: /usr/bin/python3`,
    'Traceback (most recent call last):',
    ...launcher,
    `  File "${T}/launcher/api.py", line 383, in launch_agent`,
    '    raise ChildFailedError(',
    'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ',
    '============================================================',
    `${entrypoint} FAILED`,
    '------------------------------------------------------------',
    'Failures:',
    ...(others.length ? others.flatMap((f, i) => entry(i + 1, f)) : ['  <NO_OTHER_FAILURES>']),
    '------------------------------------------------------------',
    'Root Cause (first observed failure):',
    ...entry(0, root!),
    '============================================================',
    '',
  ].join('\n');
}

/** torchrun's own report after its only worker exited non-zero. */
export function torchrunSummary(exitcode: number, now = new Date(), script = SCRIPT): string {
  const workerPid = process.pid + 1;
  return [
    `E0000 00:00:00.000000 ${process.pid} torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: ${exitcode}) local_rank: 0 (pid: ${workerPid}) of binary: /usr/bin/python3`,
    'Traceback (most recent call last):',
    '  File "/usr/local/bin/torchrun", line 8, in <module>',
    '    sys.exit(main())',
    '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/run.py", line 892, in main',
    '    run(args)',
    '  File "/usr/local/lib/python3.11/dist-packages/torch/distributed/launcher/api.py", line 270, in launch_agent',
    '    raise ChildFailedError(',
    'torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ',
    '============================================================',
    `${script} FAILED`,
    '------------------------------------------------------------',
    'Failures:',
    '  <NO_OTHER_FAILURES>',
    '------------------------------------------------------------',
    'Root Cause (first observed failure):',
    '[0]:',
    `  time      : ${stamp(now)}`,
    '  host      : aerie-sim',
    '  rank      : 0 (local_rank: 0)',
    `  exitcode  : ${exitcode} (pid: ${workerPid})`,
    '  error_file: <N/A>',
    '  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html',
    '============================================================',
    '',
  ].join('\n');
}

/**
 * Where in train_eagle3.py each failure surfaces, by revision, so a traceback names real lines:
 * SpecForge@73e6f808, @03a3dedb and @20e2e3f0:scripts/train_eagle3.py (`git show <rev>:… | grep -n`).
 */
const EARLY = {
  forwardCode: 'plosses, acces = run_forward(',
  backwardCode: 'run_backward_and_update(args, plosses, optimizer, global_step)',
  draftCode: 'draft_model_config, draft_model = build_draft_model(args)',
  loadCode: 'train_dataset = load_dataset("json", data_files=args.train_data_path)["train"]',
};
const LINES = {
  'v0.2.0': {
    ...EARLY,
    main: 836,
    forward: 756,
    backward: 759,
    backwardDef: 559,
    draft: 627,
    draftRaise: 342,
    target: 628,
    data: 633,
    load: 386,
    vocab: 402,
    destroy: 832,
  },
  'v0.2-final-save': {
    ...EARLY,
    main: 878,
    forward: 785,
    backward: 788,
    backwardDef: 582,
    draft: 656,
    draftRaise: 359,
    target: 657,
    data: 662,
    load: 403,
    vocab: 419,
    destroy: 874,
  },
  'v0.2-resume': {
    forwardCode: ') = run_forward(',
    backwardCode: 'grad_norm = run_backward_and_update(args, plosses, optimizer, global_step)',
    draftCode: 'draft_model_config, draft_model, ckpt_info, resume_state = build_draft_model(args)',
    loadCode: 'train_dataset = Dataset.from_generator(',
    main: 1374,
    forward: 1211,
    backward: 1218,
    backwardDef: 864,
    draft: 1015,
    draftRaise: 514,
    target: 1018,
    data: 1025,
    load: 582,
    vocab: 605,
    destroy: 1370,
  },
} as const;
export type TracebackRevision = keyof typeof LINES;

export function crashText(rev: TracebackRevision = 'v0.2.0'): string {
  const l = LINES[rev];
  return rankTraceback(
    [
      [l.main, '<module>', 'main()'],
      [l.forward, 'main', l.forwardCode],
    ],
    [
      [
        '/usr/local/lib/python3.11/dist-packages/specforge/core/eagle3.py',
        214,
        'forward',
        'hidden_states = self.draft_model.project_hidden_states(hidden_states)',
      ],
    ],
    [
      'RuntimeError: CUDA error: an illegal memory access was encountered',
      'CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.',
      'For debugging consider passing CUDA_LAUNCH_BLOCKING=1',
      'Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.',
    ],
  );
}

export function oomText(rev: TracebackRevision = 'v0.2.0'): string {
  const l = LINES[rev];
  return rankTraceback(
    [
      [l.main, '<module>', 'main()'],
      [l.backward, 'main', l.backwardCode],
      [l.backwardDef, 'run_backward_and_update', 'ploss.backward()'],
    ],
    [['/usr/local/lib/python3.11/dist-packages/torch/_tensor.py', 648, 'backward', 'torch.autograd.backward(']],
    [
      'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.62 GiB is free. ' +
        'Including non-PyTorch memory, this process has 77.56 GiB memory in use. Of the allocated memory 71.04 GiB is allocated by PyTorch, ' +
        'and 5.87 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting ' +
        'PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  ' +
        'See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)',
    ],
  );
}

/**
 * Teardown before 7a81ce53: destroy_distributed() destroys a size-1 mesh group torch 2.11 does not
 * register (SpecForge@73e6f808:specforge/distributed.py:72-76), after training and its saves;
 * test/fixtures/real/specforge-73e6f808/clean.log shows it.
 */
export function teardownText(rev: TracebackRevision): string {
  const l = LINES[rev];
  return rankTraceback(
    [
      [l.main, '<module>', 'main()'],
      [l.destroy, 'main', 'destroy_distributed()'],
    ],
    [
      [
        '/usr/local/lib/python3.11/dist-packages/specforge/distributed.py',
        75,
        'destroy_distributed',
        'dist.destroy_process_group(_DP_GROUP)',
      ],
      [
        '/usr/local/lib/python3.11/dist-packages/torch/distributed/distributed_c10d.py',
        2296,
        'destroy_process_group',
        'raise ValueError("Invalid process group specified")',
      ],
    ],
    ['ValueError: Invalid process group specified'],
  );
}

/** An exception raised while setting up (missing files, bad config), with its Python frames. */
export function setupErrorText(
  where: 'draft-model' | 'dataset' | 'target-model' | 'vocab-mapping',
  exception: string,
  rev: TracebackRevision = 'v0.2.0',
): string {
  const l = LINES[rev];
  const main: Frame = [l.main, '<module>', 'main()'];
  const frames: Record<typeof where, Frame[]> = {
    'draft-model': [main, [l.draft, 'main', l.draftCode], [l.draftRaise, 'build_draft_model', 'raise ValueError(']],
    dataset: [
      main,
      [l.data, 'main', 'train_dataloader, vocab_mapping_path, eval_dataloader = build_dataloaders('],
      [l.load, 'build_dataloaders', l.loadCode],
    ],
    'target-model': [
      main,
      [l.target, 'main', 'target_model, processor = build_target_model(args, draft_model_config, is_online)'],
    ],
    'vocab-mapping': [
      main,
      [l.data, 'main', 'train_dataloader, vocab_mapping_path, eval_dataloader = build_dataloaders('],
      [l.vocab, 'build_dataloaders', 'target_vocab_size=draft_model_config.vocab_size,'],
    ],
  };
  return rankTraceback(frames[where], [], [exception]);
}
