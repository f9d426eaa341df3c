import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/postgres-setup.ts'],
    // Forks, not threads: integration tests spawn daemons, and process.umask() throws in worker threads.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});
