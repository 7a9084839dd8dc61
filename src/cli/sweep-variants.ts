/**
 * `aerie sweep`'s variants: the base config file with each `--vary <path>=v1,v2` applied, the
 * cartesian product of all of them, each parsed by the real schema. Pure: text in, configs out.
 */
import { parse as parseYaml, parseDocument, stringify as stringifyYaml } from 'yaml';
import { ConfigError, parseConfigText } from '../config/load.js';
import type { Config } from '../config/schema.js';

/** More variants than this is a typo in a --vary more often than a plan, and a day of GPU time each. */
export const MAX_VARIANTS = 16;

export interface Vary {
  /** Dotted config path, as `aerie compare` lists settings: stages.train.num-epochs. */
  path: string;
  values: unknown[];
}

export interface Variant {
  /** Short and unique within the sweep: `num-epochs=1`, or `num-epochs=1 learning-rate=0.001`. */
  label: string;
  /** What this variant sets, in --vary order. */
  settings: { path: string; value: unknown }[];
  /** The base file with the settings applied (${VAR} unexpanded): the run folder's config.yaml. */
  yaml: string;
  config: Config;
}

export class SweepError extends Error {
  override readonly name = 'SweepError';
}

/** `stages.train.num-epochs=1,2` → the path and its values, each read as a YAML scalar (1 is a number, true a boolean). */
export function parseVary(arg: string): Vary {
  const eq = arg.indexOf('=');
  const path = eq > 0 ? arg.slice(0, eq).trim() : '';
  const rest = eq > 0 ? arg.slice(eq + 1) : '';
  if (!path || !rest.trim() || path.split('.').some((s) => s === '')) {
    throw new SweepError(
      `--vary ${arg}: expected <config.path>=<value>,<value>, e.g. --vary stages.train.num-epochs=1,2`,
    );
  }
  const texts = rest.split(',').map((s) => s.trim());
  if (texts.some((t) => t === ''))
    throw new SweepError(`--vary ${arg}: an empty value; write each value between commas`);
  const values = texts.map((t) => parseYaml(t) as unknown);
  const seen = new Set<string>();
  for (const v of values) {
    const k = JSON.stringify(v);
    if (seen.has(k)) throw new SweepError(`--vary ${arg}: the value ${k} is listed twice; each value is one variant`);
    seen.add(k);
  }
  return { path, values };
}

/**
 * Every variant of the base config text: the product of the --vary values in order (the first
 * --vary varies slowest). An error names the variant, the field path and the fix.
 */
export function buildVariants(baseText: string, varies: readonly Vary[], source = 'config'): Variant[] {
  if (varies.length === 0) throw new SweepError('a sweep needs at least one --vary <config.path>=<value>,<value>');
  const paths = varies.map((v) => v.path);
  const dup = paths.find((p, i) => paths.indexOf(p) !== i);
  if (dup) throw new SweepError(`--vary ${dup} is given twice; list all its values in one --vary ${dup}=a,b`);
  const count = varies.reduce((n, v) => n * v.values.length, 1);
  if (count > MAX_VARIANTS) {
    throw new SweepError(
      `${count} variants (${varies.map((v) => v.values.length).join(' × ')}); a sweep runs at most ${MAX_VARIANTS}: drop values or split it into several sweeps`,
    );
  }
  if (count < 2) throw new SweepError('a sweep needs at least two variants: give a --vary two or more values');
  const doc = parseDocument(baseText);
  if (doc.errors.length > 0) parseConfigText(baseText, source); // throws the loader's own YAML error
  const base: unknown = doc.toJS() ?? {};
  const names = labelNames(paths);
  return product(varies).map((settings) => {
    const label = settings.map((s, i) => `${names[i]}=${scalarText(s.value)}`).join(' ');
    const raw = structuredClone(base);
    for (const s of settings) setPath(raw, s.path, s.value, label);
    const yaml = stringifyYaml(raw);
    const config = withFix(() => parseConfigText(yaml, `${source}, sweep variant "${label}"`), paths);
    return { label, settings, yaml, config };
  });
}

/** A --vary path the schema does not have gets the fix beside the loader's "unknown key". */
function withFix<T>(parse: () => T, paths: readonly string[]): T {
  try {
    return parse();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    const problems = err.problems.map((p) => {
      const path = paths.find((v) => p.startsWith(`${v}: unknown key`) || v.startsWith(`${p.split(':')[0]}.`));
      return path && /unknown key/.test(p)
        ? `${p}; --vary ${path} names no config field: fix the path (\`aerie schema\` writes every field)`
        : p;
    });
    throw new ConfigError(err.source, problems);
  }
}

function product(varies: readonly Vary[]): { path: string; value: unknown }[][] {
  let out: { path: string; value: unknown }[][] = [[]];
  for (const v of varies) out = out.flatMap((prefix) => v.values.map((value) => [...prefix, { path: v.path, value }]));
  return out;
}

/** The last segment of each path, or the whole path where two --vary end alike. */
function labelNames(paths: readonly string[]): string[] {
  const last = paths.map((p) => p.slice(p.lastIndexOf('.') + 1));
  return last.map((l, i) => (last.filter((x) => x === l).length > 1 ? paths[i]! : l));
}

function scalarText(v: unknown): string {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

/** Maps whose keys are free (dots included): under them the rest of the path is one key. */
const FREE_KEY_MAPS = new Set(['env', 'overrides']);

function setPath(root: unknown, path: string, value: unknown, label: string): void {
  const segs = path.split('.');
  let node = root as Record<string, unknown>;
  for (let i = 0; i < segs.length; i++) {
    const key = segs[i]!;
    if (FREE_KEY_MAPS.has(segs[i - 1] ?? '') || i === segs.length - 1) {
      node[FREE_KEY_MAPS.has(segs[i - 1] ?? '') ? segs.slice(i).join('.') : key] = value;
      return;
    }
    const next = node[key];
    if (next === undefined || next === null) node[key] = {};
    else if (typeof next !== 'object' || Array.isArray(next)) {
      throw new ConfigError(`sweep variant "${label}"`, [
        `${segs.slice(0, i + 1).join('.')}: is ${Array.isArray(next) ? 'a list' : `the value ${JSON.stringify(next)}`}, not a section, so --vary ${path} cannot set a field under it (fix the path)`,
      ]);
    }
    node = node[key] as Record<string, unknown>;
  }
}
