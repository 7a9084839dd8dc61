/** stages.benchmark: the load levels, prompts and load generator of the speed sweep. */
import { z } from 'zod';
import { argv, duration, nonEmpty } from './fields.js';

export const benchmarkSchema = z
  .strictObject({
    concurrencies: z.array(z.number().int().min(1)).min(1).default([1, 2, 5, 10, 30, 70, 100, 250]),
    'prompts-per-level': z
      .number()
      .int()
      .min(1)
      .optional()
      .describe('Requests per round of a level; default max(8, concurrency): every slot filled once.'),
    rounds: z
      .number()
      .int('stages.benchmark.rounds must be a whole number of rounds, e.g. 3')
      .min(1, 'stages.benchmark.rounds must be at least 1 (3 gives a 75 % interval for each median, 5 a 94 % one)')
      .max(100, 'stages.benchmark.rounds above 100 is a load test, not a benchmark: use 3 to 10')
      .default(3)
      .describe(
        "Rounds per level, each with prompts of its own (the same for both variants): the report gives each figure's median over the rounds with its order-statistic interval, speedup's from the paired rounds, and flags a level whose speedup interval holds 1×.",
      ),
    'output-len': z
      .number()
      .int()
      .min(1)
      .default(256)
      .describe('Tokens per response (EOS ignored), like bench_serving --random-output-len / --sharegpt-output-len.'),
    'input-len': z.number().int().min(1).default(256).describe('Prompt length in words for random prompts.'),
    warmup: z
      .number()
      .int()
      .min(0)
      .default(1)
      .describe('Uncounted requests before each level (output capped at 32 tokens, as bench_serving does).'),
    api: z
      .enum(['generate', 'chat'])
      .default('generate')
      .describe(
        'generate: SGLang native /generate (bench_serving --backend sglang); chat: /v1/chat/completions (--backend sglang-oai-chat).',
      ),
    dataset: z
      .enum(['random', 'held-out', 'file'])
      .default('random')
      .describe(
        'random: prompts of input-len random words; held-out: the first user turns of stages.generate.input rows after the first num-samples (never trained on); file: the first user turns of dataset-path.',
      ),
    'dataset-path': nonEmpty
      .optional()
      .describe(
        'With dataset: file — conversations on the host: SpecForge or ShareGPT jsonl, or a ShareGPT .json array. Prompts are cycled when a level needs more.',
      ),
    baseline: z.boolean().default(true).describe('Also benchmark the target alone, for the speedup column.'),
    'reuse-generate-server': z
      .boolean()
      .default(true)
      .describe(
        "Benchmark the target alone on the generate stage's server right after it regenerated the data (saves a model load); levels still missing later get their own baseline server.",
      ),
    driver: z
      .enum(['aerie', 'bench-serving'])
      .default('aerie')
      .describe(
        "aerie: aerie's own load generator; bench-serving: run `python -m sglang.bench_serving` on the host per level and ingest its JSONL.",
      ),
    'bench-serving': z
      .strictObject({
        launcher: argv
          .optional()
          .describe(
            "argv that runs bench_serving on the host; default: server.launcher's interpreter with -m sglang.bench_serving.",
          ),
        'extra-args': z.array(z.string()).default([]).describe('Appended to every bench_serving command line.'),
        timeout: duration.default(2 * 3_600_000).describe('Longest one level may run.'),
      })
      .prefault({}),
    seed: z.number().int().default(1),
  })
  .superRefine((b, ctx) => {
    if (b.dataset === 'file' && !b['dataset-path']) {
      ctx.addIssue({ code: 'custom', path: ['dataset-path'], message: 'is required when dataset is "file"' });
    }
    if (b.dataset !== 'file' && b['dataset-path']) {
      ctx.addIssue({
        code: 'custom',
        path: ['dataset-path'],
        message: `is only read when dataset is "file" (dataset is "${b.dataset}")`,
      });
    }
  });
