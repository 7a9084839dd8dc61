import { defineConfig } from 'vitest/config';

/**
 * Real SpecForge on the CPU (`npm run test:real`, after scripts/setup-real.sh): opt-in, needs
 * torch in .venv-real, takes minutes. Not part of `npm test`.
 */
export default defineConfig({
  test: {
    include: ['test/real-cpu/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 1,
    testTimeout: 900_000,
    hookTimeout: 300_000,
  },
});
