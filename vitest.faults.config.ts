import { defineConfig } from 'vitest/config';

/** The fault matrix (`npm run test:faults`): long, sequential, real processes everywhere. */
export default defineConfig({
  test: {
    include: ['test/faults/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 1,
    testTimeout: 420_000,
    hookTimeout: 180_000,
  },
});
