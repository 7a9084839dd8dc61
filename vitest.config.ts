import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The fault matrix, the real-SpecForge CPU run and the real vLLM chain have their own configs:
    // npm run test:faults, npm run test:real, npm run test:real-vllm.
    exclude: ['test/faults/**', 'test/real-cpu/**', 'test/real-vllm/**', 'node_modules/**'],
    // Files run in separate processes; two at a time fits a 2-core machine that also
    // runs Temporal servers and simulators for the integration tests.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
