/**
 * The command line of SpecForge v0.2's scripts/train_eagle3.py, parsed the way Python's
 * argparse parses it (unique-prefix abbreviations, `--flag=value`, last one wins, exit 2
 * with a usage line on any error), so a launch aerie renders is accepted or refused here
 * exactly as the real script would accept or refuse it.
 *
 * The option table is the script's as of v0.2.0 in January 2026 (commit 03a3dedb of
 * sgl-project/SpecForge), including the SGLang-backend and tracker groups it pulls in.
 */

export type OptionKind = 'str' | 'int' | 'float' | 'flag' | 'int-list';
export type ArgValue = string | number | boolean | number[] | null;

export interface OptionSpec {
  flag: string;
  kind: OptionKind;
  group: string;
  default?: ArgValue;
  required?: boolean;
  choices?: string[];
}

const opt = (group: string, flag: string, kind: OptionKind, extra: Partial<OptionSpec> = {}): OptionSpec => ({
  flag,
  kind,
  group,
  default: kind === 'flag' ? false : null,
  ...extra,
});

export const TRAIN_OPTIONS: OptionSpec[] = [
  opt('model', '--target-model-path', 'str', { required: true }),
  opt('model', '--draft-model-config', 'str'),
  opt('model', '--embedding-key', 'str', { default: 'model.embed_tokens.weight' }),
  opt('model', '--lm-head-key', 'str', { default: 'lm_head.weight' }),
  opt('model', '--is-vlm', 'flag'),
  opt('model', '--target-model-backend', 'str', { default: 'sglang', choices: ['sglang', 'hf', 'custom'] }),
  opt('dataset', '--train-data-path', 'str', { required: true }),
  opt('dataset', '--train-hidden-states-path', 'str'),
  opt('dataset', '--eval-hidden-states-path', 'str'),
  opt('dataset', '--eval-data-path', 'str'),
  opt('dataset', '--chat-template', 'str', { default: 'llama3' }),
  opt('dataset', '--is-preformatted', 'flag'),
  opt('dataset', '--build-dataset-num-proc', 'int', { default: 8 }),
  opt('dataset', '--dataloader-num-workers', 'int', { default: 4 }),
  opt('training', '--num-epochs', 'int', { default: 10 }),
  opt('training', '--max-num-steps', 'int'),
  opt('training', '--batch-size', 'int', { default: 1 }),
  opt('training', '--learning-rate', 'float', { default: 1e-4 }),
  opt('training', '--max-length', 'int', { default: 2048 }),
  opt('training', '--warmup-ratio', 'float', { default: 0.015 }),
  opt('training', '--total-steps', 'int'),
  opt('training', '--max-grad-norm', 'float', { default: 0.5 }),
  opt('training', '--ttt-length', 'int', { default: 7 }),
  opt('training', '--resume', 'flag'),
  opt('training', '--ckpt-dir', 'str'),
  opt('training', '--eval-interval', 'int', { default: 5000 }),
  opt('training', '--save-interval', 'int', { default: 5000 }),
  opt('training', '--log-interval', 'int', { default: 50 }),
  opt('training', '--seed', 'int', { default: 0 }),
  opt('training', '--draft-accumulation-steps', 'int', { default: 1 }),
  opt('optimization', '--tp-size', 'int', { default: 1 }),
  opt('optimization', '--sp-ulysses-size', 'int', { default: 1 }),
  opt('optimization', '--sp-ring-size', 'int', { default: 1 }),
  opt('optimization', '--attention-backend', 'str', { default: 'flex_attention' }),
  opt('others', '--cache-key', 'str'),
  opt('others', '--cache-dir', 'str', { default: './cache' }),
  opt('others', '--output-dir', 'str', { required: true }),
  opt('others', '--verbose', 'flag'),
  opt('others', '--dist-timeout', 'int', { default: 20 }),
  opt('others', '--model-download-dir', 'str'),
  opt('vlm', '--min-pixels', 'int', { default: 50176 }),
  opt('vlm', '--max-pixels', 'int', { default: 802816 }),
  opt('profiling', '--profile', 'flag'),
  opt('profiling', '--profile-start-step', 'int', { default: 30 }),
  opt('profiling', '--profile-num-steps', 'int', { default: 4 }),
  opt('profiling', '--profile-record-shapes', 'flag'),
  // SGLang's attention-backend list changes with every SGLang release; any name is taken.
  opt('sglang target model backend', '--sglang-attention-backend', 'str', { default: 'flashinfer' }),
  opt('sglang target model backend', '--sglang-mem-fraction-static', 'float', { default: 0.4 }),
  opt('sglang target model backend', '--sglang-context-length', 'int'),
  opt('sglang target model backend', '--sglang-enable-nccl-nvls', 'flag'),
  opt('sglang target model backend', '--sglang-enable-symm-mem', 'flag'),
  opt('sglang target model backend', '--sglang-enable-torch-compile', 'flag'),
  opt('sglang target model backend', '--sglang-enable-dp-attention', 'flag'),
  opt('sglang target model backend', '--sglang-enable-dp-lm-head', 'flag'),
  opt('sglang target model backend', '--sglang-enable-piecewise-cuda-graph', 'flag'),
  opt('sglang target model backend', '--sglang-piecewise-cuda-graph-max-tokens', 'int', { default: 4096 }),
  opt('sglang target model backend', '--sglang-piecewise-cuda-graph-tokens', 'int-list'),
  opt('sglang target model backend', '--sglang-ep-size', 'int', { default: 1 }),
  opt('tracker', '--report-to', 'str', { default: 'none', choices: ['wandb', 'tensorboard', 'swanlab', 'mlflow', 'none'] }),
  opt('tracker', '--wandb-project', 'str'),
  opt('tracker', '--wandb-name', 'str'),
  opt('tracker', '--wandb-key', 'str'),
  opt('tracker', '--swanlab-project', 'str'),
  opt('tracker', '--swanlab-name', 'str'),
  opt('tracker', '--swanlab-key', 'str'),
  opt('tracker', '--mlflow-tracking-uri', 'str'),
  opt('tracker', '--mlflow-experiment-name', 'str'),
  opt('tracker', '--mlflow-run-name', 'str'),
];

export const PROG = 'train_eagle3.py';

/** argparse's dest: `--num-epochs` → `num_epochs`. */
export const destOf = (flag: string): string => flag.replace(/^--/, '').replace(/-/g, '_');
const metavarOf = (flag: string): string => destOf(flag).toUpperCase();

export type ParsedArgs = Record<string, ArgValue>;
export type ParseResult =
  | { kind: 'ok'; args: ParsedArgs }
  | { kind: 'help'; text: string }
  | { kind: 'error'; text: string };

function usageParts(): string[] {
  const parts = ['[-h]'];
  for (const o of TRAIN_OPTIONS) {
    const m = metavarOf(o.flag);
    const body =
      o.kind === 'flag' ? o.flag : o.kind === 'int-list' ? `${o.flag} ${m} [${m} ...]` : o.choices ? `${o.flag} {${o.choices.join(',')}}` : `${o.flag} ${m}`;
    parts.push(o.required ? body : `[${body}]`);
  }
  return parts;
}

/** The usage block argparse prints, wrapped at 80 columns with its hanging indent. */
export function usageText(): string {
  const head = `usage: ${PROG} `;
  const indent = ' '.repeat(head.length);
  const lines: string[] = [];
  let line = head;
  for (const p of usageParts()) {
    if (line.length + p.length > 80 && line.trim() !== head.trim()) {
      lines.push(line.trimEnd());
      line = indent;
    }
    line += `${p} `;
  }
  lines.push(line.trimEnd());
  return `${lines.join('\n')}\n`;
}

function helpText(): string {
  const out = [usageText(), 'Train Eagle3 with online data\n', 'options:', '  -h, --help            show this help message and exit'];
  let group = '';
  for (const o of TRAIN_OPTIONS) {
    if (o.group !== group) {
      group = o.group;
      out.push('', `${group}:`);
    }
    out.push(`  ${o.flag}${o.kind === 'flag' ? '' : ` ${metavarOf(o.flag)}`}`);
  }
  return `${out.join('\n')}\n`;
}

const errorText = (msg: string): string => `${usageText()}${PROG}: error: ${msg}\n`;

function toInt(raw: string): number | null {
  const t = raw.trim();
  return /^[+-]?\d+(_\d+)*$/.test(t) ? Number(t.replace(/_/g, '')) : null;
}

function toFloat(raw: string): number | null {
  const t = raw.trim().toLowerCase();
  if (/^[+-]?(inf|infinity)$/.test(t)) return t.startsWith('-') ? -Infinity : Infinity;
  if (/^[+-]?nan$/.test(t)) return NaN;
  return /^[+-]?(\d[\d_]*(\.[\d_]*)?|\.\d[\d_]*)(e[+-]?\d+)?$/.test(t) ? Number(t.replace(/_/g, '')) : null;
}

/** argparse reads `-5` or `-.5` as a value, not an option, when no option looks like a number. */
const looksLikeOption = (tok: string): boolean => tok.startsWith('-') && !/^-\d+$|^-\d*\.\d+$/.test(tok);

function resolveFlag(name: string): { spec?: OptionSpec; error?: string } {
  const exact = TRAIN_OPTIONS.find((o) => o.flag === name);
  if (exact) return { spec: exact };
  const hits = TRAIN_OPTIONS.filter((o) => o.flag.startsWith(name));
  if (hits.length === 1) return { spec: hits[0] };
  if (hits.length > 1) return { error: `ambiguous option: ${name} could match ${hits.map((h) => h.flag).join(', ')}` };
  return {};
}

export function parseTrainArgs(argv: string[]): ParseResult {
  const args: ParsedArgs = {};
  for (const o of TRAIN_OPTIONS) args[destOf(o.flag)] = o.default ?? null;
  const seen = new Set<string>();
  const unknown: string[] = [];
  let error: string | undefined;

  for (let i = 0; i < argv.length && !error; i++) {
    const tok = argv[i];
    if (tok === '-h' || tok === '--help') return { kind: 'help', text: helpText() };
    if (tok === '--') {
      unknown.push(...argv.slice(i + 1));
      break;
    }
    if (!looksLikeOption(tok) || !tok.startsWith('--')) {
      unknown.push(tok);
      continue;
    }
    const eq = tok.indexOf('=');
    const name = eq >= 0 ? tok.slice(0, eq) : tok;
    const inline = eq >= 0 ? tok.slice(eq + 1) : undefined;
    const { spec, error: ambiguous } = resolveFlag(name);
    if (ambiguous) {
      error = ambiguous;
      break;
    }
    if (!spec) {
      unknown.push(tok);
      continue;
    }
    const dest = destOf(spec.flag);
    seen.add(spec.flag);
    if (spec.kind === 'flag') {
      if (inline !== undefined) error = `argument ${spec.flag}: ignored explicit argument '${inline}'`;
      else args[dest] = true;
      continue;
    }
    const values: string[] = [];
    if (inline !== undefined) values.push(inline);
    else if (spec.kind === 'int-list') {
      while (i + 1 < argv.length && !looksLikeOption(argv[i + 1])) values.push(argv[++i]);
    } else if (i + 1 < argv.length && !looksLikeOption(argv[i + 1])) values.push(argv[++i]);
    if (values.length === 0) {
      error = `argument ${spec.flag}: expected ${spec.kind === 'int-list' ? 'at least one argument' : 'one argument'}`;
      break;
    }
    error = assign(args, spec, values);
  }
  if (error) return { kind: 'error', text: errorText(error) };
  const missing = TRAIN_OPTIONS.filter((o) => o.required && !seen.has(o.flag)).map((o) => o.flag);
  if (missing.length) return { kind: 'error', text: errorText(`the following arguments are required: ${missing.join(', ')}`) };
  if (unknown.length) return { kind: 'error', text: errorText(`unrecognized arguments: ${unknown.join(' ')}`) };
  return { kind: 'ok', args };
}

function assign(args: ParsedArgs, spec: OptionSpec, values: string[]): string | undefined {
  const dest = destOf(spec.flag);
  if (spec.kind === 'str') {
    if (spec.choices && !spec.choices.includes(values[0])) {
      return `argument ${spec.flag}: invalid choice: '${values[0]}' (choose from ${spec.choices.map((c) => `'${c}'`).join(', ')})`;
    }
    args[dest] = values[0];
    return undefined;
  }
  const conv = spec.kind === 'float' ? toFloat : toInt;
  const typeName = spec.kind === 'float' ? 'float' : 'int';
  const nums: number[] = [];
  for (const v of values) {
    const n = conv(v);
    if (n === null) return `argument ${spec.flag}: invalid ${typeName} value: '${v}'`;
    nums.push(n);
  }
  args[dest] = spec.kind === 'int-list' ? nums : nums[0];
  return undefined;
}

/** Python's str() of a value, as print_args_with_dots shows it. */
export function pyStr(v: ArgValue, kind: OptionKind | 'derived' = 'derived'): string {
  if (v === null) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (Array.isArray(v)) return `[${v.join(', ')}]`;
  if (typeof v === 'number' && kind === 'float') return pyFloat(v);
  return String(v);
}

export function pyFloat(x: number): string {
  if (Number.isNaN(x)) return 'nan';
  if (!Number.isFinite(x)) return x > 0 ? 'inf' : '-inf';
  if (Number.isInteger(x) && Math.abs(x) < 1e16) return x.toFixed(1);
  const a = Math.abs(x);
  if (a < 1e-4 || a >= 1e16) {
    return x.toExponential().replace(/e([+-])(\d)$/, 'e$10$2');
  }
  return String(x);
}

/** print_args_with_dots: key padded to the longest key, a run of middle dots, the value. */
export function argsDump(args: ParsedArgs, derived: [string, ArgValue][]): string {
  const kindOf = new Map(TRAIN_OPTIONS.map((o) => [destOf(o.flag), o.kind] as const));
  const rows: [string, string][] = Object.entries(args).map(([k, v]) => [k, pyStr(v, kindOf.get(k))]);
  for (const [k, v] of derived) rows.push([k, pyStr(v)]);
  const width = Math.max(...rows.map(([k]) => k.length));
  const lines = ['', ' -----------【args】-----------'];
  for (const [k, v] of rows) {
    const key = k.padEnd(width);
    lines.push(`${key} ${'·'.repeat(Math.max(0, 50 - key.length - v.length))} ${v}`);
  }
  return `${lines.join('\n')}\n`;
}
