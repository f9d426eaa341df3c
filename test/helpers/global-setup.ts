import { execFileSync } from 'node:child_process';

/** Integration tests run the real CLI and daemon bundles: build them once, fresh, before any test. */
export default function setup(): void {
  execFileSync(process.execPath, ['scripts/build.mjs'], { stdio: 'inherit' });
}
