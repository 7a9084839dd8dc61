/**
 * The generic trainer driver: any command, as an argv template. aerie fills the placeholders,
 * launches it detached, follows its log, relaunches it from its newest checkpoint after a crash
 * (when the config says how checkpoints are named and how to resume), and verifies the drafter
 * it leaves before the stage counts as done. This is also how aerie's own extraction layout
 * (the patched server's rows_<k>/<id>.hs dumps with index.jsonl) reaches a trainer that reads it.
 *
 * Placeholders: {target_model} {draft_model_config} {train_data} {hidden_states}
 * {hidden_states_layout} (specforge | none) {output_dir} {run_dir}, and
 * {checkpoint} in resume-args. An element may hold several, or text around one.
 */
import { TrainLaunchError } from './launch.js';

export interface CommandValues {
  target_model: string;
  draft_model_config: string;
  train_data: string;
  hidden_states?: string;
  hidden_states_layout: 'specforge' | 'none';
  output_dir: string;
  run_dir: string;
  checkpoint?: string;
}

const PLACEHOLDER = /\{([a-z_]+)\}/g;
const KNOWN = new Set([
  'target_model',
  'draft_model_config',
  'train_data',
  'hidden_states',
  'hidden_states_layout',
  'output_dir',
  'run_dir',
  'checkpoint',
]);

export function fillTemplate(arg: string, values: CommandValues, where: string): string {
  return arg.replace(PLACEHOLDER, (_m, name: string) => {
    if (!KNOWN.has(name)) {
      throw new TrainLaunchError(
        `${where}: unknown placeholder {${name}} in "${arg}" (known: ${[...KNOWN].map((k) => `{${k}}`).join(' ')})`,
      );
    }
    const v = values[name as keyof CommandValues];
    if (v === undefined || v === '') {
      const why =
        name === 'hidden_states'
          ? 'the extract stage produced no hidden states for this run'
          : name === 'checkpoint'
            ? 'there is no checkpoint to resume from'
            : 'it has no value';
      throw new TrainLaunchError(`${where}: "${arg}" uses {${name}}, but ${why}`);
    }
    return v;
  });
}

export interface CommandTemplate {
  launcher: string[];
  resumeArgs: string[];
  drafterDir: string;
  checkpointPattern?: string;
}

export function renderCommandArgv(t: CommandTemplate, values: CommandValues): string[] {
  if (t.launcher.length === 0) throw new TrainLaunchError('stages.train.launcher is empty');
  const argv = t.launcher.map((a) => fillTemplate(a, values, 'stages.train.launcher'));
  if (values.checkpoint !== undefined)
    argv.push(...t.resumeArgs.map((a) => fillTemplate(a, values, 'stages.train.resume-args')));
  return argv;
}

export function commandDrafterDir(t: CommandTemplate, values: CommandValues): string {
  return fillTemplate(t.drafterDir, values, 'stages.train.drafter-dir');
}

/** Checkpoint directories among entry names by the configured pattern (group 1 = step), newest first. */
export function commandCheckpoints(
  outputDir: string,
  pattern: string | undefined,
  entries: string[],
): { dir: string; step: number }[] {
  if (!pattern) return [];
  let re: RegExp;
  try {
    re = new RegExp(pattern);
  } catch (e) {
    throw new TrainLaunchError(
      `stages.train.checkpoint-pattern is not a valid regular expression: ${(e as Error).message}`,
    );
  }
  return entries
    .flatMap((e) => {
      const m = re.exec(e);
      const step = m?.[1] !== undefined ? Number(m[1]) : NaN;
      return Number.isFinite(step) ? [{ dir: `${outputDir}/${e}`, step }] : [];
    })
    .sort((a, b) => b.step - a.step);
}
