import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The test matrix of issue 18: every integration test file runs a second time against Postgres (the same
 * files, with daemons started on a database of their own: test/helpers/harness.ts reads
 * COMBINE_TEST_BACKEND). A new file in test/integration joins both projects by default. Left out of the
 * postgres project are only the files about SQLite itself, each with the reason:
 */
const SQLITE_ONLY = [
  // COMBINE_HOME on a full tmpfs: the database file and its WAL are what fills it; a Postgres server's disk is its operator's.
  'test/integration/disk-full.test.ts',
  // SQLite's write lock held past busy_timeout by another process; Postgres has row locks and no such file lock.
  'test/integration/infra.test.ts',
  // SQLite's migrations: file backups before migrating, a byte-identical file after a failed one (Postgres's: postgres-schema.test).
  'test/integration/migrations.test.ts',
  // SQLite's WAL: idle truncation and the pressure.wal.max_bytes backpressure.
  'test/integration/wal.test.ts',
  // Always on Postgres already, whatever the run's backend: a second run would test nothing new.
  'test/integration/postgres-daemon.test.ts',
  'test/integration/postgres-schema.test.ts',
  // Two racers on one SQLite file; pg-schedule-race.test.ts races three daemons on Postgres.
  'test/integration/schedule-race.test.ts',
];

/** Tests of several daemons on one Postgres: they need Postgres, so the sqlite project skips them. */
const PG_ONLY = 'test/integration/pg-*.test.ts';

export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts', 'test/helpers/postgres-setup.ts'],
    // Forks, not threads: integration tests spawn daemons, and process.umask() throws in worker threads.
    pool: 'forks',
    // vitest's default is one worker less than the cores: one on CI's 2 cores, and the matrix doubled the
    // integration files. They mostly wait (on daemons, the simulator's latency, retry and poll timers),
    // so three files at a time keep 2 cores busy without starving a daemon.
    maxWorkers: 3,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    projects: [
      { extends: true, test: { name: 'sqlite', include: ['test/**/*.test.ts'], exclude: [...configDefaults.exclude, PG_ONLY] } },
      {
        extends: true,
        test: { name: 'postgres', include: ['test/integration/*.test.ts'], exclude: SQLITE_ONLY, env: { COMBINE_TEST_BACKEND: 'postgres' } },
      },
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
