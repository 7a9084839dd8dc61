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

// Field names and defaults: SpecForge@a6b6b023:specforge/config/schema.py (line of each section's class).
export const SECTIONS: Record<string, Section> = {
  // :37-113
  model: {
    target_model_path: f('str'),
    draft_model_config: f('str?', null),
    draft_checkpoint_path: f('str?', null),
    draft_num_hidden_layers: f('int?', null),
    target_backend: f('str', 'sglang', ['sglang']), // :54 Literal["sglang"]
    shard_target_output: f('bool', false),
    input_modality: f('str', 'text'),
    trust_remote_code: f('bool', false),
    embedding_key: f('str', 'model.embed_tokens.weight'),
    lm_head_key: f('str', 'lm_head.weight'),
    vocab_mapping_path: f('str', ''),
    load_target_embedding: f('bool', true),
    aux_hidden_state_layer_ids: f('int-list?', null),
    torch_dtype: f('str', 'bfloat16', ['bfloat16', 'float16', 'float32']),
    cache_dir: f('str?', null),
    sglang_mem_fraction_static: f('float', 0.4),
  },
  // :129-150
  data: {
    train_data_path: f('str', ''),
    prompts_path: f('str', ''),
    hidden_states_path: f('str', ''),
    eval_data_path: f('str', ''),
    eval_hidden_states_path: f('str', ''),
    max_length: f('int', 2048),
    chat_template: f('str', 'llama3'),
    is_preformatted: f('bool', false),
    train_only_last_turn: f('bool', false),
    build_dataset_num_proc: f('int', 8),
    dataloader_num_workers: f('int?', null),
    cache_dir: f('str', './cache'),
    cache_key: f('str?', null),
    max_prompts: f('int?', null),
  },
  // :507-577
  training: {
    strategy: f('str', 'eagle3'),
    num_epochs: f('int', 1),
    max_steps: f('int?', null),
    total_steps: f('int?', null),
    batch_size: f('int', 1),
    accumulation_steps: f('int', 1),
    fsdp_sharding: f('str', 'SHARD_GRAD_OP', ['SHARD_GRAD_OP', 'FULL_SHARD', 'NO_SHARD']),
    learning_rate: f('float', 1e-4),
    lr_scheduler: f('str', 'cosine', ['cosine', 'constant']),
    warmup_ratio: f('float', 0.015),
    max_grad_norm: f('float', 0.5),
    optimizer_cpu_offload: f('bool', false),
    ttt_length: f('int', 7),
    attention_backend: f('str', 'flex_attention', ['eager', 'sdpa', 'flex_attention', 'fa', 'usp']),
    tp_size: f('int', 1),
    sp_ulysses_size: f('int', 1),
    sp_ring_size: f('int', 1),
    dist_timeout: f('int', 10),
    save_interval: f('int', 0),
    eval_interval: f('int', 0),
    log_interval: f('int', 50),
    max_checkpoints: f('int', 0),
    compact_teacher: f('bool', false),
    resume_from: f('str?', null),
    // :573; its default is resolved from deployment.mode (:685-697), see loadRunConfig.
    role: f('str', 'all', ['auto', 'all', 'producer', 'consumer']),
    seed: f('int', 42),
  },
  // :242-251
  'deployment.trainer': {
    nnodes: f('int', 1),
    nproc_per_node: f('int', 1),
    node_rank: f('int?', null),
    master_addr: f('str?', null),
    master_port: f('int', 29500),
  },
  // :168-182
  tracking: {
    report_to: f('str', 'none', ['none', 'wandb', 'tensorboard', 'swanlab', 'mlflow']),
    wandb_project: f('str?', null),
    wandb_name: f('str?', null),
  },
};
const TOP: Section = { run_id: f('str', 'specforge-run'), output_dir: f('str', './output') };
// :489: deployment.mode; :491 deployment.disaggregated (an object, required with mode=disaggregated).
const MODES = ['local_colocated', 'disaggregated'];

export type RunConfig = Record<string, Record<string, unknown>> & { top: Record<string, unknown> };

export class ConfigValidationError extends Error {
  constructor(
    readonly problems: { loc: string; msg: string; input: unknown }[],
    text?: string,
  ) {
    // A model-level validator's error has no location line (pydantic prints only the message).
    super(
      text ??
        `pydantic_core._pydantic_core.ValidationError: ${problems.length} validation error${problems.length === 1 ? '' : 's'} for Config\n` +
          problems
            .map((p) => `${p.loc ? `${p.loc}\n` : ''}  ${p.msg} [input_value=${JSON.stringify(p.input)}]`)
            .join('\n'),
    );
  }
}

/** apply_overrides' own ValueError (SpecForge@a6b6b023:specforge/config/schema.py:941-951), not a pydantic one. */
export class OverrideError extends ConfigValidationError {
  constructor(msg: string) {
    super([], `ValueError: ${msg}`);
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

/** pydantic's lax coercion of an override's text (strings from the command line) and its type check. */
function coerce(type: Scalar, v: unknown): { value: unknown; error: string | null } {
  const base = type.replace('?', '');
  if (typeof v === 'string' && base === 'int' && /^[+-]?\d+$/.test(v.trim())) return { value: Number(v), error: null };
  if (typeof v === 'string' && base === 'float' && v.trim() !== '' && Number.isFinite(Number(v)))
    return { value: Number(v), error: null };
  if (typeof v === 'string' && base === 'bool') {
    const t = v.trim().toLowerCase();
    if (['true', '1', 'yes', 'on', 't', 'y'].includes(t)) return { value: true, error: null };
    if (['false', '0', 'no', 'off', 'f', 'n'].includes(t)) return { value: false, error: null };
  }
  return { value: v, error: check(type, v) };
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

type Problem = { loc: string; msg: string; input: unknown };
const obj = (v: unknown): Record<string, unknown> =>
  v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
const extra = (loc: string, input: unknown): Problem => ({ loc, msg: 'Extra inputs are not permitted', input });

// SpecForge@a6b6b023:specforge/config/schema.py:384-420 (DisaggregatedDeploymentConfig's fields)
const DISAGGREGATED_KEYS = [
  'control_dir',
  'consumer_state_dir',
  'inbox_server_url',
  'backend',
  'store_root',
  'store_id',
  'server_urls',
  'mooncake_metadata_server',
  'mooncake_master_server_addr',
  'mooncake_local_hostname',
  'mooncake_protocol',
  'mooncake_rdma_devices',
  'producer_segment_size',
  'client_buffer_size',
  'idle_timeout_s',
  'peer_wait_timeout_s',
  'producer_hold_s',
  'shutdown_grace_s',
  'managed_local',
];

/** The config's own model validators, in their order; the first that fails is the error (SpecForge@a6b6b023:specforge/config/schema.py:699-902). */
function runStructureError(c: RunConfig): string | undefined {
  const online = !c.data!.hidden_states_path; // :904-906
  const deployment = c.deployment!.mode;
  const role = c.training!.role;
  const dis = c.deployment!.disaggregated as Record<string, unknown> | null;
  // :706-710
  if (online && deployment !== 'disaggregated')
    return 'online training requires deployment.mode=disaggregated; colocated online training is no longer supported';
  // :716-720
  if (role !== 'all' && deployment !== 'disaggregated')
    return 'training.role=auto/producer/consumer requires deployment.mode=disaggregated';
  // :721-725
  if (deployment === 'disaggregated' && role === 'all')
    return 'deployment.mode=disaggregated requires training.role=auto, producer, or consumer';
  // :727-734
  if (c.model!.draft_checkpoint_path != null && c.training!.resume_from != null) {
    return 'model.draft_checkpoint_path (weights-only warm start) and training.resume_from (full resume) are mutually exclusive';
  }
  // :740-744
  if (c.data!.eval_data_path)
    return 'data.eval_data_path is unsupported; online evaluation is not supported by the server-only capture path';
  // :745-751
  if (Boolean(c.data!.eval_hidden_states_path) !== Number(c.training!.eval_interval) > 0)
    return 'an eval data source and training.eval_interval must be configured together';
  // :764-773
  if (online && deployment === 'disaggregated' && dis && dis.backend !== 'mooncake')
    return 'online disaggregated training requires deployment.disaggregated.backend=mooncake';
  // :882-887
  if (!online && c.training!.tp_size !== 1) {
    return 'offline feature consumers do not implement trainer tensor parallelism; keep training.tp_size=1 so every non-SP rank receives its own data shard';
  }
  return undefined;
}

/** One validation of a whole document, as Config.model_validate does it. */
function validate(raw: Record<string, unknown>): RunConfig {
  const problems: Problem[] = [];
  const out = { top: {} } as RunConfig;
  for (const [name, spec] of Object.entries(TOP)) {
    const { value, error } = coerce(spec.type, name in raw ? raw[name] : spec.default);
    if (error) problems.push({ loc: name, msg: error, input: value });
    out.top[name] = value;
  }
  const known = new Set([...Object.keys(TOP), 'model', 'data', 'training', 'deployment', 'tracking']);
  for (const k of Object.keys(raw)) if (!known.has(k)) problems.push(extra(k, raw[k]));
  const deployment = obj(raw.deployment);
  for (const k of Object.keys(deployment))
    if (!['mode', 'trainer', 'disaggregated'].includes(k)) problems.push(extra(`deployment.${k}`, deployment[k]));
  const mode = deployment.mode ?? 'local_colocated';
  if (!MODES.includes(String(mode)))
    problems.push({
      loc: 'deployment.mode',
      msg: `Input should be ${MODES.map((m) => `'${m}'`).join(' or ')}`,
      input: mode,
    });
  const dis = deployment.disaggregated ?? null;
  if (dis !== null) {
    const d = obj(dis);
    for (const k of Object.keys(d))
      if (!DISAGGREGATED_KEYS.includes(k)) problems.push(extra(`deployment.disaggregated.${k}`, d[k]));
    // :389,397 control_dir and backend are required
    if (typeof d.control_dir !== 'string')
      problems.push({ loc: 'deployment.disaggregated.control_dir', msg: 'Field required', input: d });
    if (d.backend !== 'shared_dir' && d.backend !== 'mooncake')
      problems.push({
        loc: 'deployment.disaggregated.backend',
        msg: "Input should be 'shared_dir' or 'mooncake'",
        input: d.backend,
      });
  }
  // :493-504
  if (mode === 'disaggregated' && dis === null)
    problems.push({
      loc: 'deployment',
      msg: 'Value error, deployment.disaggregated is required when deployment.mode=disaggregated',
      input: deployment,
    });
  if (mode !== 'disaggregated' && dis !== null)
    problems.push({
      loc: 'deployment',
      msg: 'Value error, deployment.disaggregated requires deployment.mode=disaggregated',
      input: deployment,
    });
  out.deployment = { mode, disaggregated: dis };
  // :685-697: the role's default follows the deployment mode.
  const training = { ...obj(raw.training) };
  if (!('role' in training)) training.role = mode === 'disaggregated' ? 'auto' : 'all';
  const given: Record<string, Record<string, unknown>> = {
    ...Object.fromEntries(Object.keys(SECTIONS).map((n) => [n, obj(raw[n])])),
    training,
    'deployment.trainer': obj(deployment.trainer),
  };
  for (const [name, spec] of Object.entries(SECTIONS)) {
    const g = given[name]!;
    const section: Record<string, unknown> = {};
    for (const k of Object.keys(g)) if (!(k in spec)) problems.push(extra(`${name}.${k}`, g[k]));
    for (const [k, sp] of Object.entries(spec)) {
      if (!(k in g) && sp.default === undefined) {
        problems.push({ loc: `${name}.${k}`, msg: 'Field required', input: g });
        continue;
      }
      const { value, error } = coerce(sp.type, k in g ? g[k] : sp.default);
      const bad =
        error ??
        (sp.choices && !sp.choices.includes(String(value))
          ? `Input should be ${sp.choices.map((c) => `'${c}'`).join(' or ')}`
          : null);
      if (bad) problems.push({ loc: `${name}.${k}`, msg: bad, input: value });
      section[k] = value;
    }
    out[name] = section;
  }
  // :152-165
  const d = out.data!;
  const sources = [d.train_data_path, d.prompts_path, d.hidden_states_path].filter(
    (v) => typeof v === 'string' && v !== '',
  );
  if (sources.length !== 1) {
    problems.push({
      loc: 'data',
      msg: 'Value error, set exactly one of data.train_data_path (raw online data), data.prompts_path (pre-tokenized online data), or data.hidden_states_path (offline features)',
      input: given.data,
    });
  }
  if (problems.length) throw new ConfigValidationError(problems);
  // The Config-level validator runs only once every field is valid.
  const structure = runStructureError(out);
  if (structure) throw new ConfigValidationError([{ loc: '', msg: `Value error, ${structure}`, input: raw }]);
  return out;
}

/** The validated config as model_dump() writes it: every field, nested, defaults filled in. */
function dump(c: RunConfig): Record<string, unknown> {
  return {
    ...c.top,
    model: { ...c.model },
    data: { ...c.data },
    training: { ...c.training },
    tracking: { ...c.tracking },
    deployment: {
      mode: c.deployment!.mode,
      trainer: { ...c['deployment.trainer'] },
      disaggregated: c.deployment!.disaggregated,
    },
  };
}

/**
 * YAML text + `a.b=c` overrides → the validated config. As load_config does: the file is
 * validated on its own (Config.from_file, :925-934), then each override must name a field the
 * dumped config has, and the result is validated again (apply_overrides, :937-963).
 */
export function loadRunConfig(yamlText: string, overrides: string[]): RunConfig {
  const cfg = validate(obj(parseYaml(yamlText)));
  if (overrides.length === 0) return cfg;
  const raw = dump(cfg);
  for (const item of overrides) {
    const eq = item.indexOf('=');
    if (eq < 0) throw new OverrideError(`override '${item}' is not of the form path=value`);
    const path = item.slice(0, eq);
    const keys = path.split('.');
    let node: Record<string, unknown> = raw;
    for (const k of keys.slice(0, -1)) {
      const next = node[k];
      if (!next || typeof next !== 'object' || Array.isArray(next))
        throw new OverrideError(`override path '${path}' does not exist`);
      node = next as Record<string, unknown>;
    }
    if (!(keys[keys.length - 1]! in node)) throw new OverrideError(`override path '${path}' does not exist`);
    const value = item.slice(eq + 1);
    const current = node[keys[keys.length - 1]!];
    // :953-961: a list or dict field takes a YAML value; a scalar stays text for pydantic to coerce.
    node[keys[keys.length - 1]!] =
      (Array.isArray(current) || (current && typeof current === 'object')) && /^\s*[[{]/.test(value)
        ? scalarOf(value)
        : value;
  }
  return validate(raw);
}
