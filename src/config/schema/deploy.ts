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
  'acceptance-requests': z.number().int().min(1).default(4),
  'allow-algorithm-mismatch': z
    .boolean()
    .default(false)
    .describe(
      'For experiments only: launch even when the speculative algorithm cannot use the drafter (EAGLE with an EAGLE-3 drafter). The acceptance gate still measures it, and fails it at accept length 1.00.',
    ),
});

export type SpeculativeAlgorithm = (typeof SPECULATIVE_ALGORITHMS)[number];
