/**
 * `aerie-sim specforge {train,export} ...`: the current SpecForge CLI
 * (`specforge train -c cfg.yaml key=value ...`, `specforge export --to sglang ...`).
 */
import { parse, type Opt } from './argparse.js';
import { runSpecforgeExport } from './export.js';
import { runSpecforgeTrain } from './train.js';

// SpecForge@a6b6b023:specforge/cli.py:170-171,213 (subcommands train, export, benchmark; the sim has no benchmark).
const USAGE = 'usage: specforge [-h] {train,export,benchmark} ...\n';
// SpecForge@a6b6b023:specforge/cli.py:172-198 (`train`: -c/--config, --role, --node-rank, --plan, overrides nargs=*).
const TRAIN_OPTIONS: Opt[] = [
  { flag: '--config', kind: 'str', required: true },
  { flag: '--role', kind: 'str', default: 'auto', choices: ['auto', 'all', 'producer', 'consumer', 'both'] },
  { flag: '--node-rank', kind: 'int' },
  { flag: '--plan', kind: 'flag' },
];

const io = {
  out: (t: string) => void process.stdout.write(t),
  err: (t: string) => void process.stderr.write(t),
  env: process.env,
};

export async function runSpecforge(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === 'export') return runSpecforgeExport(rest, io);
  if (command !== 'train') {
    io.err(
      `${USAGE}specforge: error: argument command: invalid choice: '${command ?? ''}' (choose from 'train', 'export')\n`,
    );
    return 2;
  }
  // -c is argparse's short form of --config.
  const args = rest.map((a) => (a === '-c' ? '--config' : a));
  const parsed = parse('specforge train', TRAIN_OPTIONS, args, true);
  if (parsed.kind === 'help') return (io.out(parsed.text), 0);
  if (parsed.kind === 'error') return (io.err(parsed.text), 2);
  const onTerm = (): void => process.exit(143);
  process.on('SIGTERM', onTerm);
  try {
    return await runSpecforgeTrain(String(parsed.args.config), parsed.positionals, io);
  } finally {
    process.off('SIGTERM', onTerm);
  }
}
