/**
 * `python -m sglang.launch_server` argument parsing, argparse-style: same flag names and
 * aliases, `--flag=value`, unique-prefix abbreviations, and argparse's error wording and
 * exit code 2. Flags SGLang has that the simulator does not act on are accepted and kept,
 * so a real launch line (extra-args included) also starts the simulator.
 */

type Kind = 'str' | 'int' | 'float' | 'bool' | 'int-list';

interface FlagSpec {
  names: string[];
  dest: string;
  kind: Kind;
  default: unknown;
  choices?: readonly string[];
  required?: boolean;
}

export const SPECULATIVE_ALGORITHMS = ['EAGLE', 'EAGLE3', 'NEXTN', 'STANDALONE', 'NGRAM'] as const;

const f = (names: string | string[], kind: Kind, def: unknown = null, extra: Partial<FlagSpec> = {}): FlagSpec => {
  const list = Array.isArray(names) ? names : [names];
  return { names: list, dest: list[0].slice(2).replace(/-/g, '_'), kind, default: def, ...extra };
};

/** In ServerArgs field order, which is also the order of the server_args dump and server_info. */
const FLAGS: readonly FlagSpec[] = [
  f(['--model-path', '--model'], 'str', null, { required: true }),
  f('--tokenizer-path', 'str'),
  f('--tokenizer-mode', 'str', 'auto'),
  f('--load-format', 'str', 'auto'),
  f('--trust-remote-code', 'bool', false),
  f('--context-length', 'int'),
  f('--is-embedding', 'bool', false),
  f('--revision', 'str'),
  f('--host', 'str', '127.0.0.1'),
  f('--port', 'int', 30000),
  f('--skip-server-warmup', 'bool', false),
  f('--nccl-port', 'int'),
  f('--dtype', 'str', 'auto'),
  f('--quantization', 'str'),
  f('--kv-cache-dtype', 'str', 'auto'),
  f('--mem-fraction-static', 'float'),
  f('--max-running-requests', 'int'),
  f('--max-queued-requests', 'int'),
  f('--max-total-tokens', 'int'),
  f('--chunked-prefill-size', 'int'),
  f('--max-prefill-tokens', 'int', 16384),
  f('--schedule-policy', 'str', 'fcfs'),
  f('--page-size', 'int'),
  f('--device', 'str'),
  f(['--tp-size', '--tensor-parallel-size', '--tp'], 'int', 1),
  f(['--pp-size', '--pipeline-parallel-size'], 'int', 1),
  f('--stream-interval', 'int', 1),
  f('--stream-output', 'bool', false),
  f('--random-seed', 'int'),
  f('--watchdog-timeout', 'float', 300),
  f('--dist-timeout', 'int'),
  f('--download-dir', 'str'),
  f('--base-gpu-id', 'int', 0),
  f('--log-level', 'str', 'info'),
  f('--log-level-http', 'str'),
  f('--log-requests', 'bool', false),
  f('--show-time-cost', 'bool', false),
  f('--enable-metrics', 'bool', false),
  f('--decode-log-interval', 'int', 40),
  f('--api-key', 'str'),
  f('--served-model-name', 'str'),
  f('--weight-version', 'str', 'default'),
  f('--chat-template', 'str'),
  f('--enable-cache-report', 'bool', false),
  f('--reasoning-parser', 'str'),
  f('--tool-call-parser', 'str'),
  f(['--dp-size', '--data-parallel-size', '--dp'], 'int', 1),
  f('--dist-init-addr', 'str'),
  f('--nnodes', 'int', 1),
  f('--node-rank', 'int', 0),
  f('--json-model-override-args', 'str', '{}'),
  f('--attention-backend', 'str'),
  f('--sampling-backend', 'str'),
  f('--speculative-algorithm', 'str', null, { choices: SPECULATIVE_ALGORITHMS }),
  f(['--speculative-draft-model-path', '--speculative-draft-model'], 'str'),
  f('--speculative-num-steps', 'int'),
  f('--speculative-eagle-topk', 'int'),
  f('--speculative-num-draft-tokens', 'int'),
  f('--speculative-accept-threshold-single', 'float', 1.0),
  f('--speculative-accept-threshold-acc', 'float', 1.0),
  f('--speculative-token-map', 'str'),
  f(['--ep-size', '--expert-parallel-size', '--ep'], 'int', 1),
  f('--disable-radix-cache', 'bool', false),
  f('--cuda-graph-max-bs', 'int'),
  f('--cuda-graph-bs', 'int-list'),
  f('--disable-cuda-graph', 'bool', false),
  // sglang==0.5.23:srt/arg_groups/fields/exec_.py:613-628 (Backend.ALL: full, breakable, disabled)
  f('--cuda-graph-backend-decode', 'str', null, { choices: ['full', 'breakable', 'disabled'] }),
  f('--cuda-graph-backend-prefill', 'str', null, { choices: ['full', 'breakable', 'disabled'] }),
  f('--disable-custom-all-reduce', 'bool', false),
  f('--disable-overlap-schedule', 'bool', false),
  f('--enable-mixed-chunk', 'bool', false),
  f('--enable-dp-attention', 'bool', false),
  f('--enable-torch-compile', 'bool', false),
  f('--enable-deterministic-inference', 'bool', false),
  f('--allow-auto-truncate', 'bool', false),
  f('--enable-return-hidden-states', 'bool', false),
  // sglang==0.5.23:sglang/srt/arg_groups/fields/exec_.py:117-156
  f('--return-hidden-states-mode', 'str', null, { choices: ['last', 'full'] }),
  f('--enable-return-aux-hidden-states', 'bool', false),
  f('--return-aux-hidden-state-layer-ids', 'int-list'),
  f('--disable-piecewise-cuda-graph', 'bool', false),
];

export type ServerArgs = Record<string, unknown>;

export class ArgparseError extends Error {}

export const PROG = 'launch_server.py';

export function usageLine(): string {
  return `usage: ${PROG} [-h] --model-path MODEL_PATH [--host HOST] [--port PORT] [--tp-size TP_SIZE] ` +
    '[--mem-fraction-static MEM_FRACTION_STATIC] [--max-running-requests MAX_RUNNING_REQUESTS] ' +
    '[--speculative-algorithm {EAGLE,EAGLE3,NEXTN,STANDALONE,NGRAM}] ' +
    '[--speculative-draft-model-path SPECULATIVE_DRAFT_MODEL_PATH] ...';
}

const byName = new Map<string, FlagSpec>();
for (const spec of FLAGS) for (const n of spec.names) byName.set(n, spec);

function lookup(name: string): FlagSpec | null {
  const exact = byName.get(name);
  if (exact) return exact;
  // argparse's allow_abbrev: a unique prefix of a long option names it.
  const hits = [...byName.keys()].filter((n) => n.startsWith(name));
  const specs = new Set(hits.map((h) => byName.get(h)!));
  if (specs.size === 1) return [...specs][0];
  if (specs.size > 1) {
    throw new ArgparseError(`ambiguous option: ${name} could match ${hits.join(', ')}`);
  }
  return null;
}

const looksLikeFlag = (s: string) => s.startsWith('-') && !/^-\d/.test(s) && s !== '-';

function convert(spec: FlagSpec, raw: string): unknown {
  const label = `argument ${spec.names.join('/')}`;
  switch (spec.kind) {
    case 'int':
      if (!/^[+-]?\d+$/.test(raw.trim())) throw new ArgparseError(`${label}: invalid int value: '${raw}'`);
      return Number.parseInt(raw, 10);
    case 'float': {
      const v = Number(raw);
      if (raw.trim() === '' || Number.isNaN(v)) throw new ArgparseError(`${label}: invalid float value: '${raw}'`);
      return v;
    }
    default:
      if (spec.choices && !spec.choices.includes(raw)) {
        throw new ArgparseError(`${label}: invalid choice: '${raw}' (choose from ${spec.choices.map((c) => `'${c}'`).join(', ')})`);
      }
      return raw;
  }
}

export interface Parsed {
  args: ServerArgs;
  /** dests the user set explicitly (SGLang tells "unset" from "set to the default" by None). */
  explicit: Set<string>;
  help: boolean;
}

export function parseLaunchArgs(argv: readonly string[]): Parsed {
  const args: ServerArgs = {};
  for (const spec of FLAGS) args[spec.dest] = spec.default;
  const explicit = new Set<string>();
  const unrecognized: string[] = [];
  let help = false;
  for (let i = 0; i < argv.length; i++) {
    const tok = argv[i];
    if (tok === '-h' || tok === '--help') { help = true; continue; }
    if (!looksLikeFlag(tok) || !tok.startsWith('--')) { unrecognized.push(tok); continue; }
    const eq = tok.indexOf('=');
    const name = eq >= 0 ? tok.slice(0, eq) : tok;
    const inline = eq >= 0 ? tok.slice(eq + 1) : null;
    const spec = lookup(name);
    if (!spec) { unrecognized.push(tok); continue; }
    const label = `argument ${spec.names.join('/')}`;
    if (spec.kind === 'bool') {
      if (inline !== null) throw new ArgparseError(`${label}: ignored explicit argument '${inline}'`);
      args[spec.dest] = true;
    } else if (spec.kind === 'int-list') {
      const vals: string[] = inline !== null ? [inline] : [];
      while (inline === null && i + 1 < argv.length && !looksLikeFlag(argv[i + 1])) vals.push(argv[++i]);
      if (vals.length === 0) throw new ArgparseError(`${label}: expected at least one argument`);
      args[spec.dest] = vals.map((v) => convert({ ...spec, kind: 'int' }, v));
    } else {
      let raw = inline;
      if (raw === null) {
        if (i + 1 >= argv.length || looksLikeFlag(argv[i + 1])) throw new ArgparseError(`${label}: expected one argument`);
        raw = argv[++i];
      }
      args[spec.dest] = convert(spec, raw);
    }
    explicit.add(spec.dest);
  }
  if (help) return { args, explicit, help };
  if (!explicit.has('model_path')) {
    throw new ArgparseError('the following arguments are required: --model-path/--model');
  }
  if (unrecognized.length > 0) throw new ArgparseError(`unrecognized arguments: ${unrecognized.join(' ')}`);
  return { args, explicit, help };
}

/** Python repr of a value, as `logger.info(f"{server_args=}")` prints it. */
export function pyRepr(v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (typeof v === 'number') return String(v);
  if (typeof v === 'string') return `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  if (Array.isArray(v)) return `[${v.map(pyRepr).join(', ')}]`;
  if (typeof v === 'object') {
    return `{${Object.entries(v as Record<string, unknown>).map(([k, x]) => `${pyRepr(k)}: ${pyRepr(x)}`).join(', ')}}`;
  }
  return String(v);
}

const FLOAT_DESTS = new Set(FLAGS.filter((s) => s.kind === 'float').map((s) => s.dest));

export function serverArgsRepr(args: ServerArgs): string {
  const field = (k: string, v: unknown) =>
    `${k}=${FLOAT_DESTS.has(k) && typeof v === 'number' && Number.isInteger(v) ? v.toFixed(1) : pyRepr(v)}`;
  return `ServerArgs(${Object.entries(args).map(([k, v]) => field(k, v)).join(', ')})`;
}
