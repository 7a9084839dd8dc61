/**
 * The typed run config of the current `specforge train -c config.yaml [section.field=value ...]`:
 * YAML on disk plus dotted overrides, validated strictly (an unknown field is an error, as
 * with SpecForge's pydantic models), with the fields the reference lists and their defaults.
 * Errors are rendered like pydantic's ValidationError.
 */
import { parse as parseYaml } from 'yaml';

type Scalar = 'str' | 'int' | 'float' | 'bool' | 'str?' | 'int?' | 'float?' | 'int-list?';
type Section = Record<string, { type: Scalar; default?: unknown; choices?: string[] }>;

const f = (type: Scalar, def?: unknown, choices?: string[]) => ({ type, default: def, choices });

export const SECTIONS: Record<string, Section> = {
  model: {
    target_model_path: f('str'),
    draft_model_config: f('str?', null),
    draft_checkpoint_path: f('str?', null),
    target_backend: f('str', 'sglang', ['sglang', 'hf', 'custom']),
    vocab_mapping_path: f('str', ''),
    trust_remote_code: f('bool', false),
    embedding_key: f('str', 'model.embed_tokens.weight'),
    lm_head_key: f('str', 'lm_head.weight'),
    aux_hidden_state_layer_ids: f('int-list?', null),
    torch_dtype: f('str', 'bfloat16', ['bfloat16', 'float16', 'float32']),
    sglang_mem_fraction_static: f('float', 0.4),
  },
  data: {
    train_data_path: f('str', ''),
    prompts_path: f('str', ''),
    hidden_states_path: f('str', ''),
    eval_hidden_states_path: f('str', ''),
    max_length: f('int', 2048),
    chat_template: f('str', 'llama3'),
    is_preformatted: f('bool', false),
    build_dataset_num_proc: f('int', 8),
    dataloader_num_workers: f('int?', null),
    cache_dir: f('str', './cache'),
  },
  training: {
    strategy: f('str', 'eagle3'),
    num_epochs: f('int', 1),
    max_steps: f('int?', null),
    total_steps: f('int?', null),
    batch_size: f('int', 1),
    accumulation_steps: f('int', 1),
    learning_rate: f('float', 1e-4),
    warmup_ratio: f('float', 0.015),
    max_grad_norm: f('float', 0.5),
    ttt_length: f('int', 7),
    tp_size: f('int', 1),
    dist_timeout: f('int', 10),
    save_interval: f('int', 0),
    eval_interval: f('int', 0),
    log_interval: f('int', 50),
    max_checkpoints: f('int', 0),
    resume_from: f('str?', null),
    seed: f('int', 42),
    attention_backend: f('str', 'flex_attention', ['eager', 'sdpa', 'flex_attention', 'fa', 'usp']),
  },
  'deployment.trainer': {
    nnodes: f('int', 1),
    nproc_per_node: f('int', 1),
    master_port: f('int', 29500),
  },
  tracking: {
    report_to: f('str', 'none', ['none', 'wandb', 'tensorboard', 'swanlab', 'mlflow']),
    wandb_project: f('str?', null),
    wandb_name: f('str?', null),
  },
};
const TOP: Section = { run_id: f('str', 'specforge-run'), output_dir: f('str', './output') };

export type RunConfig = Record<string, Record<string, unknown>> & { top: Record<string, unknown> };

export class ConfigValidationError extends Error {
  constructor(readonly problems: { loc: string; msg: string; input: unknown }[]) {
    super(
      `pydantic_core._pydantic_core.ValidationError: ${problems.length} validation error${problems.length === 1 ? '' : 's'} for Config\n` +
        problems.map((p) => `${p.loc}\n  ${p.msg} [input_value=${JSON.stringify(p.input)}]`).join('\n'),
    );
  }
}

/** An override value, read the way a YAML scalar is. */
export function scalarOf(raw: string): unknown {
  try {
    return parseYaml(raw) as unknown;
  } catch {
    return raw;
  }
}

function check(type: Scalar, v: unknown): string | null {
  const opt = type.endsWith('?');
  if (opt && v === null) return null;
  switch (type.replace('?', '')) {
    case 'str':
      return typeof v === 'string' ? null : 'Input should be a valid string';
    case 'int':
      return Number.isInteger(v) ? null : 'Input should be a valid integer';
    case 'float':
      return typeof v === 'number' ? null : 'Input should be a valid number';
    case 'bool':
      return typeof v === 'boolean' ? null : 'Input should be a valid boolean';
    case 'int-list':
      return Array.isArray(v) && v.every(Number.isInteger) ? null : 'Input should be a valid list of integers';
  }
  return null;
}

/** YAML text + `a.b=c` overrides → the validated config, or a ConfigValidationError. */
export function loadRunConfig(yamlText: string, overrides: string[]): RunConfig {
  const raw = (parseYaml(yamlText) ?? {}) as Record<string, unknown>;
  const problems: { loc: string; msg: string; input: unknown }[] = [];
  for (const o of overrides) {
    const eq = o.indexOf('=');
    if (eq <= 0) {
      problems.push({ loc: o, msg: 'Override must be section.field=value', input: o });
      continue;
    }
    const keys = o.slice(0, eq).split('.');
    let node = raw;
    for (const k of keys.slice(0, -1)) {
      if (typeof node[k] !== 'object' || node[k] === null) node[k] = {};
      node = node[k] as Record<string, unknown>;
    }
    node[keys[keys.length - 1]!] = scalarOf(o.slice(eq + 1));
  }
  const out = { top: {} } as RunConfig;
  for (const [name, spec] of Object.entries(TOP)) {
    const v = name in raw ? raw[name] : spec.default;
    const bad = check(spec.type, v);
    if (bad) problems.push({ loc: name, msg: bad, input: v });
    out.top[name] = v;
  }
  const sectionOf = (dotted: string): Record<string, unknown> | undefined => {
    let node: unknown = raw;
    for (const k of dotted.split('.')) node = (node as Record<string, unknown> | undefined)?.[k];
    return node as Record<string, unknown> | undefined;
  };
  const known = new Set([...Object.keys(TOP), 'model', 'data', 'training', 'deployment', 'tracking']);
  for (const k of Object.keys(raw)) if (!known.has(k)) problems.push({ loc: k, msg: 'Extra inputs are not permitted', input: raw[k] });
  const deployment = (raw.deployment ?? {}) as Record<string, unknown>;
  for (const k of Object.keys(deployment)) if (k !== 'trainer' && k !== 'mode') problems.push({ loc: `deployment.${k}`, msg: 'Extra inputs are not permitted', input: deployment[k] });
  for (const [name, spec] of Object.entries(SECTIONS)) {
    const given = sectionOf(name) ?? {};
    const section: Record<string, unknown> = {};
    for (const k of Object.keys(given)) if (!(k in spec)) problems.push({ loc: `${name}.${k}`, msg: 'Extra inputs are not permitted', input: given[k] });
    for (const [k, s] of Object.entries(spec)) {
      const present = k in given;
      if (!present && s.default === undefined) {
        problems.push({ loc: `${name}.${k}`, msg: 'Field required', input: given });
        continue;
      }
      const v = present ? given[k] : s.default;
      const bad = check(s.type, v) ?? (s.choices && !s.choices.includes(String(v)) ? `Input should be ${s.choices.map((c) => `'${c}'`).join(' or ')}` : null);
      if (bad) problems.push({ loc: `${name}.${k}`, msg: bad, input: v });
      section[k] = v;
    }
    out[name] = section;
  }
  const d = out.data!;
  const sources = [d.train_data_path, d.prompts_path, d.hidden_states_path].filter((v) => typeof v === 'string' && v !== '');
  if (sources.length !== 1) {
    problems.push({
      loc: 'data',
      msg: 'Value error, set exactly one of data.train_data_path (raw online data), data.prompts_path (pre-tokenized online data), or data.hidden_states_path (offline features)',
      input: sectionOf('data') ?? {},
    });
  }
  if (problems.length) throw new ConfigValidationError(problems);
  return out;
}
