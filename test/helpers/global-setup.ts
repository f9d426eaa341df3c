import { execFileSync } from 'node:child_process';
import { chromiumPath } from './browser.js';

/**
 * Integration tests run the real CLI and daemon bundles: build them once, fresh, before any test — the
 * shipped bundle (dist/) and the test bundle (dist-test/: the same code with the crash tests' seam on;
 * test/helpers/harness.ts runs it for a daemon started with COMBINE_CRASH_AT). The page tests' Chromium
 * is unpacked here too, once, so parallel test files never unpack it at the same time.
 */
export default async function setup(): Promise<void> {
  // Vitest runs a global setup for the root config and again for each project (sqlite, postgres), the
  // later ones while the first project's files already run: a second build would replace dist/ under
  // their daemons and CLIs. One build per run.
  if (process.env.COMBINE_TEST_BUILT === '1') return;
  process.env.COMBINE_TEST_BUILT = '1';
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
  execFileSync(process.execPath, ['scripts/build.mjs', '--test-hooks'], { stdio: 'inherit' });
  await chromiumPath();
}
