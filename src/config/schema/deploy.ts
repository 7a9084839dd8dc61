/** stages.deploy: serving the target with the trained drafter, and the acceptance gate. */
import { z } from 'zod';

export const SPECULATIVE_ALGORITHMS = ['EAGLE', 'EAGLE3', 'NEXTN', 'STANDALONE', 'NGRAM'] as const;

export const deploySchema = z.strictObject({
  'speculative-algorithm': z.enum(SPECULATIVE_ALGORITHMS).default('EAGLE3'),
  'draft-model-path': z.string().optional().describe('Serve this drafter instead of the one the train stage produces.'),
  'num-steps': z.number().int().min(1).optional(),
  'eagle-topk': z.number().int().min(1).optional(),
  'num-draft-tokens': z.number().int().min(1).optional(),
  'max-running-requests': z.number().int().min(1).optional(),
  'spec-v2': z
    .enum(['auto', 'on', 'off'])
    .default('auto')
    .describe(
      "Spec v2 (overlap scheduling of draft and verify), rendered for the host's release: --enable-beta-spec on 0.5.4, SGLANG_ENABLE_SPEC_V2 on 0.5.9-0.5.14, always on from 0.5.15 (off is refused there). auto: the release's default. `aerie plan` says what it does.",
    ),
  'acceptance-threshold': z.number().min(1).default(1.3),
  'acceptance-requests': z
    .number()
    .int()
    .min(1)
    .default(4)
    .describe(
      'Greedy requests the acceptance gate sends: the first user turns of stages.generate.input after its first num-samples (never trained on), or four fixed prompts when no row is held out.',
    ),
  'acceptance-versus': z
    .strictObject({
      run: z
        .string()
        .min(1)
        .describe('A run whose benchmark finished on this target host: its recorded gate is the bar.'),
      margin: z
        .number()
        .min(0)
        .default(0.1)
        .describe("How far below that run's accept length this drafter may fall and still pass."),
    })
    .optional()
    .describe(
      "No worse than another run: the gate's bar becomes that run's gate accept length less the margin, when that is above acceptance-threshold. Its gate must have used the same kind of prompts (held-out or fixed).",
    ),
  'allow-algorithm-mismatch': z
    .boolean()
    .default(false)
    .describe(
      'For experiments only: launch even when the speculative algorithm cannot use the drafter (EAGLE with an EAGLE-3 drafter). The acceptance gate still measures it, and fails it at accept length 1.00.',
    ),
});

export type SpeculativeAlgorithm = (typeof SPECULATIVE_ALGORITHMS)[number];
