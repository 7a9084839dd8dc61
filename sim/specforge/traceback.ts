/**
 * How a HEAD training run (`specforge train`, a6b6b023) dies of an exception raised inside
 * training set-up, on each rank:
 *
 * - `_train` runs init_distributed before building the run (SpecForge@a6b6b023:specforge/cli.py:130-144),
 *   and torch's init_process_group installs an excepthook that prefixes every line of an
 *   uncaught traceback with `[rank<r>]: ` (torch 2.13 distributed_c10d.py:1921-1938), even at
 *   world size 1; destroy_distributed does not remove it.
 * - At world size 1 the CLI runs the worker in its own process (launch_plan.py:540-541,
 *   cli.py:258-266): the traceback is all, exit 1.
 * - Above that the CLI runs `python -m torch.distributed.run --standalone --nproc_per_node N
 *   --module specforge.cli train …` (launch_plan.py:542-568, :759-766); each refusing rank
 *   prints its own traceback, then torchrun its ChildFailedError report, and the CLI exits
 *   with torchrun's status (launch_plan.py:1110-1128).
 *
 * Frames are HEAD's, each checked with `git show a6b6b023:<path> | sed -n <line>p`.
 */
import { torchrunFailures } from '../train/faults.js';

const SITE = '/usr/local/lib/python3.11/dist-packages';
type Frame = [file: string, line: number, fn: string, code: string];

// `python -m specforge.cli` (how HEAD's CLI starts its workers, and how aerie's launcher may).
const RUNPY: Frame[] = [
  ['<frozen runpy>', 198, '_run_module_as_main', ''],
  ['<frozen runpy>', 88, '_run_code', ''],
];
// SpecForge@a6b6b023: cli.py:298, :263, :144; application/composition.py:145; training/assembly.py:631;
// launch.py:623, :114; training/trainer.py:285 (in Trainer.__init__, :77). The same chain the real
// CPU run printed (test/fixtures/real/specforge-a6b6b023-cpu-ws2/shrink.log), whose PyPI cli.py
// sits 5 lines lower; the sim leaves out Python 3.11's `^^^^` marker lines.
const TO_TRAINER: Frame[] = [
  ...RUNPY,
  ['specforge/cli.py', 298, '<module>', 'raise SystemExit(main())'],
  ['specforge/cli.py', 263, 'main', '_train(bind_run(role_config, resolved.algorithm))'],
  ['specforge/cli.py', 144, '_train', 'return build_application_run(resolved).run()'],
  ['specforge/application/composition.py', 145, 'build_application_run', 'return build_training_run('],
  ['specforge/training/assembly.py', 631, 'build_training_run', 'trainer = build_offline_runtime('],
  ['specforge/launch.py', 623, 'build_offline_runtime', 'return _assemble_trainer('],
  ['specforge/launch.py', 114, '_assemble_trainer', 'trainer = Trainer('],
];
/** CheckpointManager.read_resume_state's refusal (checkpoint.py:312-319). */
export const RESUME_REFUSED: Frame[] = [
  ...TO_TRAINER,
  ['specforge/training/trainer.py', 285, '__init__', 'else CheckpointManager.read_resume_state(resume_from)'],
  ['specforge/training/checkpoint.py', 313, 'read_resume_state', 'raise ValueError('],
];
/** The trainer's own resume checks: strategy (trainer.py:288-292), then the contract (:335-341). */
export const CONTRACT_REFUSED = (line: number): Frame[] => [
  ...TO_TRAINER,
  ['specforge/training/trainer.py', line, '__init__', 'raise ValueError('],
];

export function rankTraceback(rank: number, frames: Frame[], exception: string): string {
  const lines = ['Traceback (most recent call last):'];
  for (const [file, line, fn, code] of frames) {
    lines.push(`  File "${file.startsWith('<') ? file : `${SITE}/${file}`}", line ${line}, in ${fn}`);
    if (code) lines.push(`    ${code}`);
  }
  lines.push(exception);
  return `${lines.map((l) => `[rank${rank}]: ${l}`).join('\n')}\n`;
}

/** The log a run of `world` ranks leaves when the ranks in `errors` raise (rank → exception line). */
export function ranksFailedText(world: number, errors: Map<number, string>, frames: Frame[], now = new Date()): string {
  const ranks = [...errors.keys()].sort((a, b) => a - b);
  const text = ranks.map((r) => rankTraceback(r, frames, errors.get(r)!)).join('');
  return world > 1
    ? text +
        torchrunFailures(
          ranks.map((rank) => ({ rank, exitcode: 1 })),
          now,
          'specforge.cli',
        )
    : text;
}
