/**
 * The command line of SpecForge v0.2's scripts/train_eagle3.py, parsed the way Python's
 * argparse parses it (unique-prefix abbreviations, `--flag=value`, last one wins, exit 2
 * with a usage line on any error), so a launch aerie renders is accepted or refused here
 * exactly as the real script would accept or refuse it.
 *
 * The option table is the revision's (options.ts), including the SGLang-backend and tracker
 * groups it pulls in.
 */

import {
  optionStrings,
  trainOptions,
  type ArgValue,
  type OptionKind,
  type OptionSpec,
  type V02Revision,
} from './options.js';

export type { ArgValue, OptionKind, OptionSpec, V02Revision };

export const PROG = 'train_eagle3.py';

/** argparse's dest: `--num-epochs` → `num_epochs`. */
export const destOf = (flag: string): string => flag.replace(/^--/, '').replace(/-/g, '_');
const metavarOf = (flag: string): string => destOf(flag).toUpperCase();

export type ParsedArgs = Record<string, ArgValue>;
export type ParseResult =
  { kind: 'ok'; args: ParsedArgs } | { kind: 'help'; text: string } | { kind: 'error'; text: string };

function usageParts(options: OptionSpec[]): string[] {
  const parts = ['[-h]'];
  for (const o of options) {
    const m = metavarOf(o.flag);
    const body =
      o.kind === 'flag'
        ? o.flag
        : o.kind === 'bool-optional'
          ? optionStrings(o).join(' | ')
          : o.kind === 'int-list'
            ? `${o.flag} ${m} [${m} ...]`
            : o.choices
              ? `${o.flag} {${o.choices.join(',')}}`
              : `${o.flag} ${m}`;
    parts.push(o.required ? body : `[${body}]`);
  }
  return parts;
}

/** The usage block argparse prints, wrapped at 80 columns with its hanging indent. */
export function usageText(options: OptionSpec[] = trainOptions()): string {
  const head = `usage: ${PROG} `;
  const indent = ' '.repeat(head.length);
  const lines: string[] = [];
  let line = head;
  for (const p of usageParts(options)) {
    if (line.length + p.length > 80 && line.trim() !== head.trim()) {
      lines.push(line.trimEnd());
      line = indent;
    }
    line += `${p} `;
  }
  lines.push(line.trimEnd());
  return `${lines.join('\n')}\n`;
}

function helpText(options: OptionSpec[]): string {
  const out = [
    usageText(options),
    'Train Eagle3 with online data\n',
    'options:',
    '  -h, --help            show this help message and exit',
  ];
  let group = '';
  for (const o of options) {
    if (o.group !== group) {
      group = o.group;
      out.push('', `${group}:`);
    }
    out.push(
      `  ${optionStrings(o).join(', ')}${o.kind === 'flag' || o.kind === 'bool-optional' ? '' : ` ${metavarOf(o.flag)}`}`,
    );
  }
  return `${out.join('\n')}\n`;
}

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

/** The spec an option string names (exactly, or as argparse's unique prefix), and which string it was. */
function resolveFlag(options: OptionSpec[], name: string): { spec?: OptionSpec; str?: string; error?: string } {
  const all = options.flatMap((o) => optionStrings(o).map((str) => ({ spec: o, str })));
  const exact = all.find((e) => e.str === name);
  if (exact) return exact;
  const hits = all.filter((e) => e.str.startsWith(name));
  if (hits.length === 1) return hits[0];
  if (hits.length > 1) return { error: `ambiguous option: ${name} could match ${hits.map((h) => h.str).join(', ')}` };
  return {};
}

export function parseTrainArgs(argv: string[], rev: V02Revision = 'v0.2.0'): ParseResult {
  const options = trainOptions(rev);
  const errorText = (msg: string): string => `${usageText(options)}${PROG}: error: ${msg}\n`;
  const args: ParsedArgs = {};
  for (const o of options) args[destOf(o.flag)] = o.default ?? null;
  const seen = new Set<string>();
  const unknown: string[] = [];
  let error: string | undefined;

  for (let i = 0; i < argv.length && !error; i++) {
    const tok = argv[i];
    if (tok === '-h' || tok === '--help') return { kind: 'help', text: helpText(options) };
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
    const { spec, str, error: ambiguous } = resolveFlag(options, name);
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
    if (spec.kind === 'flag' || spec.kind === 'bool-optional') {
      if (inline !== undefined)
        error = `argument ${optionStrings(spec).join('/')}: ignored explicit argument '${inline}'`;
      else args[dest] = str !== spec.flag ? false : true; // `--no-x` of a BooleanOptionalAction
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
  const missing = options.filter((o) => o.required && !seen.has(o.flag)).map((o) => o.flag);
  if (missing.length)
    return { kind: 'error', text: errorText(`the following arguments are required: ${missing.join(', ')}`) };
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
export function argsDump(args: ParsedArgs, derived: [string, ArgValue][], rev: V02Revision = 'v0.2.0'): string {
  const kindOf = new Map(trainOptions(rev).map((o) => [destOf(o.flag), o.kind] as const));
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
