import { defineConfig } from 'vitest/config';

/**
 * Real vLLM on the CPU (`npm run test:real-vllm`, after scripts/setup-vllm.sh and
 * scripts/setup-real.sh): vLLM's own parser judging aerie's lines, and the whole pipeline for
 * real (test/real-vllm/chain.test.ts). Minutes per server start; run by .ci/run, not npm test.
 */
export default defineConfig({
  test: {
    include: ['test/real-vllm/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
    testTimeout: 3_600_000,
    hookTimeout: 600_000,
  },
});
