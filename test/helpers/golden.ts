/**
 * Golden files: the expected text lives in test/golden/ and is compared exactly. Regenerate only on
 * purpose, with UPDATE_GOLDEN=1, so that every change to a prompt or the schema shows up in review.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { ROOT } from './harness.js';

export function expectGolden(name: string, actual: string): void {
  const path = join(ROOT, 'test', 'golden', name);
  if (process.env.UPDATE_GOLDEN === '1') {
    writeFileSync(path, actual);
    return;
  }
  if (!existsSync(path)) throw new Error(`golden file ${path} is missing; create it with UPDATE_GOLDEN=1 npx vitest run`);
  expect(actual, `differs from test/golden/${name} (regenerate with UPDATE_GOLDEN=1 if the change is intended)`).toBe(readFileSync(path, 'utf8'));
}
