import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Behaviour tests that also run against Postgres: the same files, a second time, with daemons started on
 * a database of their own (test/helpers/harness.ts reads COMBINE_TEST_BACKEND). A test file that is about
 * SQLite itself (its WAL, file modes, backups, a full tmpfs, the home lock) never joins this list.
 * Growing it to the whole integration suite is the test matrix of issue 18.
 */
/** Tests of several daemons on one Postgres (issue 18): they need Postgres, so the sqlite project skips them. */
const PG_ONLY = 'test/integration/pg-*.test.ts';

const POSTGRES_SUITE = [
  'test/integration/core.test.ts',
  'test/integration/generate-all.test.ts',
  'test/integration/crash.test.ts',
  'test/integration/supersede.test.ts',
  PG_ONLY,
];

export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/postgres-setup.ts'],
    // Forks, not threads: integration tests spawn daemons, and process.umask() throws in worker threads.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'sqlite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, PG_ONLY] } },
      { extends: true, test: { name: 'postgres', include: POSTGRES_SUITE, env: { COMBINE_TEST_BACKEND: 'postgres' } } },
    ],
    // `npm test` runs with --coverage. It counts what runs in the test processes (unit tests and the
    // in-process daemons); daemons the harness spawns run the bundle in dist/ and are not counted, so the
    // figure is a floor of what the suite exercises. The thresholds keep it from sliding back.
    coverage: {
      provider: 'v8',
      include: ['src/**/*.ts'],
      exclude: ['src/web/client/**'],
      reporter: ['text-summary'],
      // Measured 2026-11-23 by the unit tests alone: 44% statements, 36% branches, 46% functions, 47% lines.
      thresholds: { statements: 40, branches: 32, functions: 40, lines: 42 },
    },
  },
});
