/**
 * The parts of CPython 3.11's argparse (Lib/argparse.py) that decide whether a launch line
 * parses and what it says when it does not: option classification with unique-prefix
 * abbreviations, nargs patterns, `type=` conversion with SGLang's own converters, choices, and
 * the messages, all with Python's repr. sim/sglang/args.ts runs it over a release's options.
 */

/** What argparse needs of an option to classify, count and convert its values. */
export interface PyOption {
  names: string[];
  nargs: null | number | '?' | '*' | '+';
  type: string | null;
  choices: (string | number)[] | null;
}

/** Python's repr of a str or int, as argparse's %r writes it into messages. */
export function pyStrRepr(v: string | number): string {
  if (typeof v === 'number') return String(v);
  const q = v.includes("'") && !v.includes('"') ? '"' : "'";
  const body = v
    .replace(/\\/g, '\\\\')
    .replace(/\n/g, '\\n')
    .replace(/\r/g, '\\r')
    .replace(/\t/g, '\\t')
    .replace(/[\x00-\x1f\x7f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`);
  return `${q}${q === "'" ? body.replace(/'/g, "\\'") : body}${q}`;
}

class TypeFailure extends Error {}
/** An argparse.ArgumentTypeError: its text is the whole message after the flag name. */
class ArgumentTypeError extends Error {}

const PY_INT = /^\s*[+-]?\d(_?\d)*\s*$/;
const PY_FLOAT = /^\s*[+-]?((\d(_?\d)*)?\.\d(_?\d)*|\d(_?\d)*\.?)([eE][+-]?\d(_?\d)*)?\s*$/;

function pyInt(raw: string): number {
  if (!PY_INT.test(raw)) throw new TypeFailure();
  return Number.parseInt(raw.trim().replace(/_/g, ''), 10);
}

/** The argparse `type=` callables SGLang uses, by their __name__. */
const CONVERTERS: Record<string, (raw: string) => unknown> = {
  str: (raw) => raw,
  int: pyInt,
  float: (raw) => {
    const t = raw.trim().toLowerCase();
    if (/^[+-]?(inf|infinity)$/.test(t)) return t.startsWith('-') ? -Infinity : Infinity;
    if (/^[+-]?nan$/.test(t)) return Number.NaN;
    if (!PY_FLOAT.test(raw)) throw new TypeFailure();
    return Number(raw.trim().replace(/_/g, ''));
  },
  // sglang==0.5.23:srt/utils/common.py:3388-3391
  nullable_str: (raw) => (raw === '' || raw === 'None' ? null : raw),
  // json.loads: a JSONDecodeError is a ValueError, so argparse says "invalid loads value".
  loads: (raw) => {
    try {
      return JSON.parse(raw);
    } catch {
      throw new TypeFailure();
    }
  },
  // sglang==0.5.23:srt/utils/common.py:4818-4824
  json_list_type: (raw) => {
    try {
      return JSON.parse(raw);
    } catch {
      throw new ArgumentTypeError(`Invalid JSON list: ${raw}. Please provide a valid JSON list.`);
    }
  },
  // sglang==0.5.23:srt/utils/common.py:3394-3430 (the same in 0.5.12 :2383)
  human_readable_int: (raw) => {
    const value = raw.trim();
    const m = /^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)$/.exec(value);
    if (m) {
      const [, num, suffix] = m as unknown as [string, string, string];
      const iec: Record<string, bigint> = { Ki: 1n << 10n, Mi: 1n << 20n, Gi: 1n << 30n, Ti: 1n << 40n };
      const si: Record<string, bigint> = { k: 10n ** 3n, M: 10n ** 6n, G: 10n ** 9n, T: 10n ** 12n };
      const [whole, frac = ''] = num.split('.') as [string, string?];
      if (iec[suffix] !== undefined) {
        if (frac) {
          throw new ArgumentTypeError(
            `Decimals are not allowed with IEC suffixes like '${suffix}'. ` +
              `Use an integer IEC value such as '${BigInt(whole)}${suffix}', or an SI value such as '${num}${suffix[0]}'.`,
          );
        }
        return Number(BigInt(whole) * iec[suffix]!);
      }
      return Number((BigInt(whole + frac) * si[suffix]!) / 10n ** BigInt(frac.length));
    }
    if (PY_INT.test(value)) return pyInt(value);
    throw new ArgumentTypeError(
      `Invalid integer value: '${value}'. Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). Suffixes are case-sensitive.`,
    );
  },
  // sglang==0.5.23:srt/model_executor/cuda_graph_config.py:237-243
  parse_cuda_graph_backend_arg: (raw) => {
    if (raw === 'tc_piecewise')
      throw new ArgumentTypeError('tc_piecewise was removed; select breakable, full, or disabled');
    return raw;
  },
  // cuda_graph_config.py:246-: a JSON object of per-phase settings. The simulator keeps the text;
  // the real one also checks each phase's keys (not imitated).
  parse_cuda_graph_config_arg: (raw) => raw,
};

export type Classified<T> = { option: T | null; optionString: string; explicit: string | null } | null;

/** argparse's _parse_optional (CPython 3.11 Lib/argparse.py:2229-2284). */
export function classify<T>(table: Map<string, T>, tok: string, fail: (m: string) => never): Classified<T> {
  if (!tok || tok[0] !== '-') return null;
  const exact = table.get(tok);
  if (exact) return { option: exact, optionString: tok, explicit: null };
  if (tok.length === 1) return null;
  const eq = tok.indexOf('=');
  if (eq >= 0 && table.has(tok.slice(0, eq)))
    return { option: table.get(tok.slice(0, eq))!, optionString: tok.slice(0, eq), explicit: tok.slice(eq + 1) };
  // _get_option_tuples (argparse.py:2286-2330): every option string the prefix starts, in
  // registration order, aliases of one action counted apart.
  const hits: { option: T; optionString: string; explicit: string | null }[] = [];
  if (tok[1] === '-') {
    const prefix = eq >= 0 ? tok.slice(0, eq) : tok;
    for (const [name, option] of table)
      if (name.startsWith(prefix))
        hits.push({ option, optionString: name, explicit: eq >= 0 ? tok.slice(eq + 1) : null });
  } else {
    for (const [name, option] of table) {
      if (name === tok.slice(0, 2)) hits.push({ option, optionString: name, explicit: tok.slice(2) });
      else if (name.startsWith(tok)) hits.push({ option, optionString: name, explicit: null });
    }
  }
  if (hits.length > 1) fail(`ambiguous option: ${tok} could match ${hits.map((h) => h.optionString).join(', ')}`);
  if (hits.length === 1) return hits[0]!;
  if (/^-\d+$|^-\d*\.\d+$/.test(tok)) return null;
  if (tok.includes(' ')) return null;
  return { option: null, optionString: tok, explicit: null };
}

/** argparse's nargs patterns for an optional (argparse.py:2332-2380, '-' dropped for optionals). */
export function nargsPattern(o: PyOption): RegExp {
  const n = o.nargs;
  const body = n === null ? 'A' : n === '?' ? 'A?' : n === '*' ? 'A*' : n === '+' ? 'A+' : 'A'.repeat(n);
  return new RegExp(`^(${body})`);
}

export function nargsError(o: PyOption): string {
  if (o.nargs === null) return 'expected one argument';
  if (o.nargs === '?') return 'expected at most one argument';
  if (o.nargs === '+') return 'expected at least one argument';
  return `expected ${o.nargs} argument${o.nargs === 1 ? '' : 's'}`;
}

export function convert(o: PyOption, raw: string, fail: (m: string) => never): unknown {
  const label = `argument ${o.names.join('/')}`;
  let v: unknown;
  try {
    v = (CONVERTERS[o.type ?? 'str'] ?? CONVERTERS.str!)(raw);
  } catch (e) {
    if (e instanceof ArgumentTypeError) fail(`${label}: ${e.message}`);
    fail(`${label}: invalid ${o.type} value: ${pyStrRepr(raw)}`);
  }
  if (o.choices && !o.choices.some((c) => c === v)) {
    fail(`${label}: invalid choice: ${pyStrRepr(v as string)} (choose from ${o.choices.map(pyStrRepr).join(', ')})`);
  }
  return v;
}
