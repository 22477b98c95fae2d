import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'bench/test/**/*.test.ts'],
    // The upgrade test runs once in CI, by vitest.upgrade.config.ts.
    exclude: [...configDefaults.exclude, 'test/upgrade/**'],
    globalSetup: ['test/setup/global-setup.ts'],
    setupFiles: ['test/setup/payload-schema.ts', 'test/setup/has-assertions.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two cores: test files run in parallel, each in its own database.
    maxWorkers: 2,
    pool: 'forks',
  },
});
