import { defineConfig } from 'vitest/config';

// CI's upgrade test (test/upgrade/), run once by .ci/run against one server:
// it installs and builds the previous release, which the main suite should
// not do in each of its runs.
export default defineConfig({
  test: {
    include: ['test/upgrade/**/*.test.ts'],
    globalSetup: ['test/setup/global-setup.ts'],
    setupFiles: ['test/setup/payload-schema.ts', 'test/setup/has-assertions.ts'],
    testTimeout: 300_000,
    hookTimeout: 600_000,
    maxWorkers: 1,
    pool: 'forks',
  },
});
