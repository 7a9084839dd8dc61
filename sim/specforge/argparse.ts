/**
 * A small argparse: the parts of Python's argparse the simulated SpecForge scripts rely on
 * (unique-prefix abbreviations, `--flag=value`, last value wins, required options, choices,
 * and exit 2 with a usage line on any error), so a rendered command line is accepted or
 * refused the way the real script would.
 */

export type Kind = 'str' | 'int' | 'float' | 'flag';

export interface Opt {
  flag: string;
  kind: Kind;
  default?: string | number | boolean | null;
  required?: boolean;
  choices?: string[];
}

export type Args = Record<string, string | number | boolean | null>;
export type Parsed =
  { kind: 'ok'; args: Args; positionals: string[] } | { kind: 'error'; text: string } | { kind: 'help'; text: string };

export const destOf = (flag: string): string => flag.replace(/^--?/, '').replace(/-/g, '_');

export function usage(prog: string, opts: Opt[], positional = ''): string {
  const parts = opts.map((o) => {
    const body =
      o.kind === 'flag' ? o.flag : `${o.flag} ${o.choices ? `{${o.choices.join(',')}}` : destOf(o.flag).toUpperCase()}`;
    return o.required ? body : `[${body}]`;
  });
  return `usage: ${prog} [-h] ${parts.join(' ')}${positional ? ` ${positional}` : ''}\n`;
}

const looksLikeOption = (tok: string): boolean => tok.startsWith('-') && !/^-\d+$|^-\d*\.\d+$/.test(tok);

function convert(o: Opt, raw: string): number | string | null {
  if (o.kind === 'int') return /^[+-]?\d+$/.test(raw.trim()) ? Number(raw) : null;
  if (o.kind === 'float') return /^[+-]?(\d+(\.\d*)?|\.\d+)(e[+-]?\d+)?$/i.test(raw.trim()) ? Number(raw) : null;
  return raw;
}

/** Parse argv; `positionals` collects non-option tokens when allowPositionals, else they are errors. */
export function parse(prog: string, opts: Opt[], argv: string[], allowPositionals = false): Parsed {
  const args: Args = {};
  for (const o of opts) args[destOf(o.flag)] = o.default ?? (o.kind === 'flag' ? false : null);
  const seen = new Set<string>();
  const unknown: string[] = [];
  const positionals: string[] = [];
  const fail = (msg: string): Parsed => ({ kind: 'error', text: `${usage(prog, opts)}${prog}: error: ${msg}\n` });
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i]!;
    if (tok === '-h' || tok === '--help') return { kind: 'help', text: usage(prog, opts) };
    if (!looksLikeOption(tok)) {
      (allowPositionals ? positionals : unknown).push(tok);
      continue;
    }
    const eq = tok.indexOf('=');
    const name = eq >= 0 ? tok.slice(0, eq) : tok;
    const exact = opts.find((o) => o.flag === name);
    const hits = exact ? [exact] : name.startsWith('--') ? opts.filter((o) => o.flag.startsWith(name)) : [];
    if (hits.length > 1) return fail(`ambiguous option: ${name} could match ${hits.map((h) => h.flag).join(', ')}`);
    const o = hits[0];
    if (!o) {
      unknown.push(tok);
      continue;
    }
    seen.add(o.flag);
    if (o.kind === 'flag') {
      if (eq >= 0) return fail(`argument ${o.flag}: ignored explicit argument '${tok.slice(eq + 1)}'`);
      args[destOf(o.flag)] = true;
      continue;
    }
    let raw: string | undefined = eq >= 0 ? tok.slice(eq + 1) : undefined;
    if (raw === undefined && i + 1 < argv.length && !looksLikeOption(argv[i + 1]!)) raw = argv[++i];
    if (raw === undefined) return fail(`argument ${o.flag}: expected one argument`);
    const v = convert(o, raw);
    if (v === null) return fail(`argument ${o.flag}: invalid ${o.kind} value: '${raw}'`);
    if (o.choices && !o.choices.includes(String(v))) {
      return fail(
        `argument ${o.flag}: invalid choice: '${raw}' (choose from ${o.choices.map((c) => `'${c}'`).join(', ')})`,
      );
    }
    args[destOf(o.flag)] = v;
  }
  const missing = opts.filter((o) => o.required && !seen.has(o.flag)).map((o) => o.flag);
  if (missing.length) return fail(`the following arguments are required: ${missing.join(', ')}`);
  if (unknown.length) return fail(`unrecognized arguments: ${unknown.join(' ')}`);
  return { kind: 'ok', args, positionals };
}
