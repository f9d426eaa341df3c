/**
 * The crash tests' seam (daemon/test-hooks.ts) is in the test bundle and nowhere in the shipped one:
 * test/helpers/global-setup.ts built both, with scripts/build.mjs, as CI builds them.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/harness.js';

const HOOKS = ['COMBINE_CRASH_AT', 'process.kill(process.pid'];

describe('the shipped bundle', () => {
  it('contains no crash hook; the test bundle, built from the same code, does', () => {
    // Every file of it: the daemon's and the CLI's entries and the chunks they load on demand.
    const files = readdirSync(join(ROOT, 'dist')).filter((f) => /\.c?js$/.test(f));
    expect(files).toEqual(expect.arrayContaining(['daemon.js', 'cli.js', 'cli.cjs']));
    for (const file of files) {
      const shipped = readFileSync(join(ROOT, 'dist', file), 'utf8');
      for (const hook of HOOKS) expect(shipped, `dist/${file}`).not.toContain(hook);
    }
    // The daemon's code is in chunks its two entries (daemon.js, daemon-run.js) share: the entry and what it imports.
    for (const entry of ['daemon.js', 'daemon-run.js']) {
      const test = withImports(join(ROOT, 'dist-test'), entry);
      for (const hook of HOOKS) expect(test, `dist-test/${entry} and its chunks`).toContain(hook);
    }
  });
});

/** The text of `entry` in `dir` and of every file of `dir` it imports, directly or not (static and dynamic imports). */
function withImports(dir: string, entry: string): string {
  const seen = new Set<string>();
  const texts: string[] = [];
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = readFileSync(join(dir, file), 'utf8');
    texts.push(text);
    for (const m of text.matchAll(/(?:from |import\()"\.\/([^"]+)"/g)) visit(m[1]!);
  };
  visit(entry);
  return texts.join('\n');
}
