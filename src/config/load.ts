/**
 * YAML → validated Config. Every problem is reported at once, each naming its field
 * path and what is expected, so a researcher fixes a file in one pass.
 */
import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseDocument } from 'yaml';
import { z } from 'zod';
import { configSchema, crossFieldProblems, type Config } from './schema.js';
import { withEngineDefaults } from './schema/server.js';

export class ConfigError extends Error {
  constructor(
    readonly source: string,
    readonly problems: string[],
  ) {
    super(
      `${source}: ${problems.length} problem${problems.length === 1 ? '' : 's'}\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    this.name = 'ConfigError';
  }
}

/** The directory aerie is installed in: ${AERIE_HOME} in configs points here. */
export const AERIE_HOME = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export async function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): Promise<Config> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    throw new ConfigError(path, [`cannot read the file: ${(err as Error).message}`]);
  }
  return parseConfigText(text, path, env);
}

export function parseConfigText(text: string, source = 'config', env: NodeJS.ProcessEnv = process.env): Config {
  const doc = parseDocument(text, { prettyErrors: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      source,
      doc.errors.map((e) => `YAML syntax: ${e.message.split('\n')[0]}`),
    );
  }
  const raw: unknown = doc.toJS() ?? {};
  const problems: string[] = [];
  const expanded = withEngineDefaults(
    expandVariables(raw, [], { ...env, AERIE_HOME: env.AERIE_HOME ?? AERIE_HOME }, problems),
  );
  const parsed = configSchema.safeParse(expanded);
  if (!parsed.success) problems.push(...formatIssues(parsed.error.issues));
  problems.push(...crossFieldProblems(expanded).map((p) => `${fieldPath(p.path)}: ${p.message}`));
  if (problems.length > 0) throw new ConfigError(source, problems);
  return parsed.data!;
}

/**
 * ${VAR} in any string is expanded now, except inside `env:` maps: those are expanded on the
 * worker at launch time, so secrets (HF_TOKEN, API keys) never enter workflow history.
 */
function expandVariables(
  value: unknown,
  path: (string | number)[],
  env: NodeJS.ProcessEnv,
  problems: string[],
): unknown {
  if (typeof value === 'string') {
    return value.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_m, name: string) => {
      const v = env[name];
      if (v === undefined) {
        problems.push(
          `${fieldPath(path)}: refers to \${${name}}, which is not set in the environment (set it, or write the value)`,
        );
        return '';
      }
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v, i) => expandVariables(v, [...path, i], env, problems));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) {
      out[k] = k === 'env' ? v : expandVariables(v, [...path, k], env, problems);
    }
    return out;
  }
  return value;
}

export function fieldPath(path: readonly PropertyKey[]): string {
  if (path.length === 0) return '(top level)';
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

export function formatIssues(issues: readonly z.core.$ZodIssue[]): string[] {
  const out: string[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      const allowed = allowedKeysAt(issue.path);
      for (const key of issue.keys) {
        const hint = allowed ? ` (expected one of: ${allowed.join(', ')})` : '';
        out.push(`${fieldPath([...issue.path, key])}: unknown key${suggest(key, allowed)}${hint}`);
      }
    } else if (issue.code === 'invalid_type' && issue.input === undefined) {
      out.push(`${fieldPath(issue.path)}: required, ${issue.message.replace(/^Invalid input: /, '')}`);
    } else {
      out.push(`${fieldPath(issue.path)}: ${issue.message.replace(/^Invalid input: /, '')}`);
    }
  }
  return out;
}

/** The keys the schema allows at a path, for "unknown key" hints. */
function allowedKeysAt(path: readonly PropertyKey[]): string[] | undefined {
  let node: z.ZodType | undefined = configSchema as unknown as z.ZodType;
  for (const key of path) {
    node = unwrap(node);
    if (node instanceof z.ZodObject) node = (node.shape as Record<string, z.ZodType>)[String(key)];
    else if (node instanceof z.ZodRecord) node = node.valueType as z.ZodType;
    else if (node instanceof z.ZodArray) node = node.element as z.ZodType;
    else return undefined;
  }
  node = unwrap(node);
  return node instanceof z.ZodObject ? Object.keys(node.shape) : undefined;
}

function unwrap(node: z.ZodType | undefined): z.ZodType | undefined {
  let n = node;
  for (let i = 0; i < 10 && n; i++) {
    if (n instanceof z.ZodDefault || n instanceof z.ZodPrefault || n instanceof z.ZodOptional)
      n = n.unwrap() as z.ZodType;
    else if (n instanceof z.ZodPipe) n = n.in as z.ZodType;
    else break;
  }
  return n;
}

function suggest(key: string, allowed: string[] | undefined): string {
  if (!allowed) return '';
  let best: string | undefined;
  let bestDist = 3;
  for (const a of allowed) {
    const d = editDistance(key, a);
    if (d < bestDist) [best, bestDist] = [a, d];
  }
  return best ? ` — did you mean "${best}"?` : '';
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const tmp = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = tmp;
    }
  }
  return row[b.length]!;
}

/** JSON Schema of the YAML file (the input side: durations as strings, defaults optional). */
export function configJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}
