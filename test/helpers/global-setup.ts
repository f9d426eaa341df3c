import { execFileSync } from 'node:child_process';
import { chromiumPath } from './browser.js';

/**
 * Integration tests run the real CLI and daemon bundles: build them once, fresh, before any test. The
 * page tests' Chromium is unpacked here too, once, so parallel test files never unpack it at the same time.
 */
export default async function setup(): Promise<void> {
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
  await chromiumPath();
}
