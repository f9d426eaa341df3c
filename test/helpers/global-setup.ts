import { execFileSync } from 'node:child_process';
import { chromiumPath } from './browser.js';

/**
 * Integration tests run the real CLI and daemon bundles: build them once, fresh, before any test — the
 * shipped bundle (dist/) and the test bundle (dist-test/: the same code with the crash tests' seam on;
 * test/helpers/harness.ts runs it for a daemon started with COMBINE_CRASH_AT). The page tests' Chromium
 * is unpacked here too, once, so parallel test files never unpack it at the same time.
 */
export default async function setup(): Promise<void> {
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
  execFileSync(process.execPath, ['scripts/build.mjs', '--test-hooks'], { stdio: 'inherit' });
  await chromiumPath();
}
