// Run by scripts/build.mjs after bundling: one run of the CLI through bin/combine that writes V8's code
// for what it compiled to <dist>/cli.cjs.cache. The run is the common path of a short command —
// `threads --active --json` parsed, its action run up to the daemon's socket — against an empty home
// with no daemon (exit 3): the parts of the bundle every command loads, commander's parsing, the client.
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const distDir = resolve(process.argv[2] ?? 'dist');
const home = mkdtempSync(join(tmpdir(), 'combine-build-'));
process.on('exit', () => rmSync(home, { recursive: true, force: true }));
process.env.COMBINE_HOME = home;
process.argv = [process.argv[0], 'combine', 'threads', '--active', '--json', '--no-autostart'];
createRequire(import.meta.url)('../bin/combine').boot(distDir, true);
