/**
 * `python -m vllm.entrypoints.openai.api_server` argument parsing as vLLM 0.32.0's
 * FlexibleArgumentParser does it (vllm==0.32.0:vllm/utils/argparse_utils.py:124-443) over that
 * release's own options: args-flags.json holds every option string, nargs, type and choices of
 * the real parser (make_arg_parser, entrypoints/launchers/cli_args.py; built as
 * entrypoints/launchers/api_server/entry.py:221-225 builds it) and the usage it prints, so every
 * real flag is accepted (and ignored unless listed in ACTED below), unique prefixes work as in
 * CPython 3.11's argparse, and anything else is `api_server.py: error: ...`, exit 2.
 *
 * What FlexibleArgumentParser adds that is imitated: `--flag_name` spelled with underscores
 * (argparse_utils.py:335-352). Not imitated: dotted JSON keys (`--speculative-config.method`),
 * `--config` files, `-O3`.
 */
import { readFileSync } from 'node:fs';
import { classify, convert, nargsError, nargsPattern, type PyOption, pyStrRepr } from '../sglang/pyargparse.js';

interface RealOption extends PyOption {
  dest: string;
  action: string;
}

interface FlagsFile {
  options: {
    names: string[];
    dest: string;
    nargs: RealOption['nargs'] | 0;
    type: string | null;
    choices: (string | number)[] | null;
    action: string;
  }[];
  usage: string;
}

const FILE = JSON.parse(readFileSync(new URL('./args-flags.json', import.meta.url), 'utf8')) as FlagsFile;

/** The real parser's type callables, as the simulator converts them (pyargparse.ts CONVERTERS by name). */
const TYPE_OF: Record<string, string> = {
  int: 'int',
  float: 'float',
  str: 'str',
  human_readable_int: 'human_readable_int',
  loads: 'loads',
};
/** Options whose real type is a wrapper (`_optional_type(json.loads)`, `human_readable_int_or_auto`, ...). */
const TYPE_BY_DEST: Record<string, string> = {
  speculative_config: 'loads',
  max_model_len: 'max_model_len',
  port: 'int',
};

const OPTIONS: RealOption[] = FILE.options.map((o) => ({
  names: o.names,
  dest: o.dest,
  nargs: o.nargs as RealOption['nargs'],
  type: TYPE_BY_DEST[o.dest] ?? (o.type ? (TYPE_OF[o.type] ?? 'str') : null),
  choices: o.choices,
  action: o.action,
}));

const TABLE = new Map<string, RealOption>();
for (const o of OPTIONS) for (const n of o.names) TABLE.set(n, o);

export const USAGE = FILE.usage;
export const PROG = 'api_server.py';

export class ArgparseError extends Error {
  readonly stderr: string;
  constructor(message: string) {
    super(message);
    this.stderr = `${USAGE}${PROG}: error: ${message}\n`;
  }
}

/** What the simulator reads, with vLLM's defaults (vllm==0.32.0:vllm/engine/arg_utils.py, entrypoints/launchers/cli_args.py). */
export interface VllmArgs {
  model: string;
  host: string | null;
  port: number;
  tensor_parallel_size: number;
  max_num_seqs: number | null;
  gpu_memory_utilization: number;
  speculative_config: unknown;
  max_model_len: number | null;
  dtype: string;
  enforce_eager: boolean;
  seed: number;
  served_model_name: string[] | null;
  disable_uvicorn_access_log: boolean;
  /** The positional model_tag: parsed and ignored by this entry point (vllm==0.32.0:entrypoints/launchers/cli_args.py:428-433). */
  model_tag: string | null;
}

export const DEFAULTS: VllmArgs = {
  model: 'Qwen/Qwen3-0.6B', // engine/arg_utils.py:944
  host: null, // cli_args.py:283
  port: 8000, // cli_args.py:285
  tensor_parallel_size: 1, // engine/arg_utils.py:1177
  max_num_seqs: null, // engine/arg_utils.py:1717 (None -> per platform)
  gpu_memory_utilization: 0.92, // engine/arg_utils.py:1357
  speculative_config: null,
  max_model_len: null, // engine/arg_utils.py:966
  dtype: 'auto', // engine/arg_utils.py:952
  enforce_eager: false, // engine/arg_utils.py:975
  seed: 0, // engine/arg_utils.py:953
  served_model_name: null, // engine/arg_utils.py:1006
  disable_uvicorn_access_log: false, // cli_args.py:309
  model_tag: null,
};

export interface Parsed {
  args: VllmArgs;
  /** dest -> value for every option given (the `non-default args` log line). */
  given: Map<string, unknown>;
  help: boolean;
}

/** human_readable_int_or_auto (vllm==0.32.0:vllm/utils/argparse_utils.py:75-90): 1k = 1000, 1K = 1024, auto/-1 = -1. */
function maxModelLen(raw: string, fail: (m: string) => never): number {
  const v = raw.trim();
  if (v === '-1' || v.toLowerCase() === 'auto') return -1;
  const m = /^(\d+(?:\.\d+)?)([kKmMgGtT]?)$/.exec(v);
  if (!m) fail(`argument --max-model-len: invalid human_readable_int_or_auto value: ${pyStrRepr(raw)}`);
  const [, num, suffix] = m!;
  const dec: Record<string, number> = { k: 1e3, m: 1e6, g: 1e9, t: 1e12 };
  const bin: Record<string, number> = { K: 2 ** 10, M: 2 ** 20, G: 2 ** 30, T: 2 ** 40 };
  if (!suffix) {
    if (num!.includes('.'))
      fail(`argument --max-model-len: invalid human_readable_int_or_auto value: ${pyStrRepr(raw)}`);
    return Number(num);
  }
  if (dec[suffix] !== undefined) return Math.trunc(Number(num) * dec[suffix]!);
  if (num!.includes('.'))
    fail(
      `argument --max-model-len: Decimals are not allowed with binary suffixes like ${suffix}. Did you mean to use ${num}${suffix.toLowerCase()} instead?`,
    );
  return Number(num) * bin[suffix]!;
}

/** FlexibleArgumentParser's rewrite: underscores to dashes in a `--name` up to its first '.' or '='. */
function dashed(arg: string): string {
  if (!arg.startsWith('--')) return arg;
  const eq = arg.indexOf('=');
  const key = eq >= 0 ? arg.slice(0, eq) : arg;
  const dot = key.indexOf('.', 2);
  const head = dot >= 0 ? key.slice(0, dot) : key;
  return `--${head.slice(2).replace(/_/g, '-')}${key.slice(head.length)}${eq >= 0 ? arg.slice(eq) : ''}`;
}

/** Parse a launch line; throws ArgparseError (exit 2). */
export function parseVllmArgs(rawArgv: readonly string[]): Parsed {
  const argv = rawArgv.map(dashed);
  const fail = (m: string): never => {
    throw new ArgparseError(m);
  };
  const args: VllmArgs = { ...DEFAULTS };
  const given = new Map<string, unknown>();
  const positionals: string[] = [];
  const extras: string[] = [];
  const dashdash = argv.indexOf('--');
  const found = argv.map((tok, i) => (dashdash >= 0 && i >= dashdash ? null : classify(TABLE, tok, fail)));
  const pattern = argv.map((tok, i) => (dashdash >= 0 && i === dashdash ? '-' : found[i] ? 'O' : 'A')).join('');
  for (let i = 0; i < argv.length;) {
    const c = found[i];
    if (!c || !c.option) {
      if (c || argv[i] === '--') extras.push(argv[i]!);
      else positionals.push(argv[i]!);
      i += 1;
      continue;
    }
    const o = c.option;
    const label = `argument ${o.names.join('/')}`;
    let values: string[];
    const nargs = o.nargs as RealOption['nargs'] | 0;
    if (c.explicit !== null) {
      if (nargs === 0) fail(`${label}: ignored explicit argument ${pyStrRepr(c.explicit)}`);
      values = [c.explicit];
      i += 1;
    } else if (nargs === 0) {
      values = [];
      i += 1;
    } else {
      const m = nargsPattern(o).exec(pattern.slice(i + 1));
      if (!m) fail(`${label}: ${nargsError(o)}`);
      const count = m![1]!.length;
      values = argv.slice(i + 1, i + 1 + count) as string[];
      i += 1 + count;
    }
    if (o.action === '_HelpAction') return { args, given, help: true };
    let value: unknown;
    if (o.action === 'BooleanOptionalAction') value = !c.optionString.startsWith('--no-');
    else if (o.action === '_StoreTrueAction') value = true;
    else if (o.type === 'max_model_len') value = maxModelLen(values[0]!, fail);
    else if (nargs === '+' || nargs === '*') value = values.map((v) => convert(o, v, fail));
    else if (nargs === '?' && values.length === 0) value = null;
    else value = convert(o, values[0]!, fail);
    if (o.dest === 'speculative_config' && (value === null || typeof value !== 'object' || Array.isArray(value)))
      fail(`${label}: invalid loads value: ${pyStrRepr(values[0]!)}`);
    given.set(o.dest, value);
    if (o.dest in args) (args as unknown as Record<string, unknown>)[o.dest] = value;
  }
  // One optional positional, model_tag (nargs '?'); any more are unrecognized.
  if (positionals.length > 0) args.model_tag = positionals.shift()!;
  extras.push(...positionals);
  if (extras.length > 0) fail(`unrecognized arguments: ${extras.join(' ')}`);
  return { args, given, help: false };
}

/** Python's repr of a value as the `non-default args: {...}` line prints it. */
export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return Number.isInteger(v) ? String(v) : String(v);
  if (typeof v === 'string') return pyStrRepr(v);
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  if (typeof v === 'object')
    return `{${Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${pyStrRepr(k)}: ${pyRepr(x)}`)
      .join(', ')}}`;
  return String(v);
}

const ORDER = new Map(OPTIONS.map((o, i) => [o.dest, i]));

/** An option's place in the real parser (the order of the `non-default args` dict). */
export function optionOrder(dest: string): number {
  return ORDER.get(dest) ?? OPTIONS.length;
}
