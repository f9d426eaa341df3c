// Bundles the CLI, the daemon and the dashboard's client assets with esbuild.
// `--test-hooks` builds the test bundle into dist-test/ instead: the same code with the crash tests' seam
// switched on (daemon/test-hooks.ts). The shipped bundle (dist/) has __COMBINE_TEST_HOOKS__ = false, and
// esbuild drops the seam's code from it.
// The CLI is one self-contained file (fast cold start: ~10 ms of module loading instead of ~65 ms);
// the daemon keeps its dependencies external (better-sqlite3 is native; start-up time matters less).
import { build } from 'esbuild';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import ts from 'typescript';

const root = new URL('..', import.meta.url).pathname;
const { version } = JSON.parse(readFileSync(`${root}package.json`, 'utf8'));
const testHooks = process.argv.includes('--test-hooks');
const outdir = testHooks ? 'dist-test' : 'dist';
const common = {
  platform: 'node',
  target: 'node20',
  format: 'esm',
  bundle: true,
  sourcemap: true,
  logLevel: 'warning',
  absWorkingDir: root,
  define: { __COMBINE_VERSION__: JSON.stringify(version), __COMBINE_TEST_HOOKS__: String(testHooks) },
  // Bundled CommonJS dependencies call require(); give the ESM bundle one.
  banner: { js: "import { createRequire as __cr } from 'node:module'; const require = __cr(import.meta.url);" },
};

/**
 * The package's public entry (`import { defineOperation } from 'combine'`): the operation API, bundled,
 * with its declarations. api.ts has no imports, so its .d.ts is transpiled on its own.
 */
function writeOperationTypes() {
  const source = readFileSync(`${root}src/operations/api.ts`, 'utf8');
  const out = ts.transpileDeclaration(source, { fileName: 'api.ts', reportDiagnostics: true, compilerOptions: { isolatedDeclarations: true, strict: true } });
  if (out.diagnostics?.length)
    throw new Error(`src/operations/api.ts: ${out.diagnostics.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('; ')}`);
  mkdirSync(`${root}dist`, { recursive: true });
  writeFileSync(`${root}dist/operations.d.ts`, out.outputText);
}

if (!testHooks) writeOperationTypes();
await Promise.all([
  build({
    ...common,
    entryPoints: { cli: 'src/cli/main.ts' },
    outdir,
    // `--follow` (ws, cli-progress) goes to a chunk loaded on demand: plain commands start faster.
    splitting: true,
    chunkNames: 'cli-[name]-[hash]',
    // ws's optional native speed-ups are not installed; the daemon and simulator are loaded lazily.
    external: ['bufferutil', 'utf-8-validate', './daemon.js', './sim.js'],
  }),
  build({
    ...common,
    // read-worker: the control plane's worker thread (ledger verify/export), started by the daemon next to it.
    entryPoints: {
      daemon: 'src/daemon/main.ts',
      sim: 'src/sim/main.ts',
      'read-worker': 'src/daemon/control-plane/read-worker.ts',
      ...(testHooks ? {} : { operations: 'src/operations/api.ts' }),
    },
    outdir,
    packages: 'external',
    // A dynamic import (the OpenTelemetry SDK when tracing is on, the Postgres driver when the state is
    // there) becomes its own chunk, loaded on first use: an idle SQLite daemon without tracing never holds them.
    splitting: true,
    chunkNames: 'daemon-[name]-[hash]',
  }),
  // The dashboard's browser code and style (dist/web), served by the daemon; nothing from a CDN.
  build({
    entryPoints: ['src/web/client/dashboard.ts', 'src/web/client/dashboard.css'],
    outdir: `${outdir}/web`,
    absWorkingDir: root,
    bundle: true,
    minify: true,
    platform: 'browser',
    target: 'es2020',
    format: 'iife',
    logLevel: 'warning',
  }),
]);
