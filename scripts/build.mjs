// Bundles the CLI, the daemon and the dashboard's client assets with esbuild.
// `--test-hooks` builds the test bundle into dist-test/ instead: the same code with the crash tests' seam
// switched on (daemon/test-hooks.ts). The shipped bundle (dist/) has __COMBINE_TEST_HOOKS__ = false, and
// esbuild drops the seam's code from it.
// The CLI is one self-contained CommonJS file, dist/cli.cjs, run by bin/combine with V8's compiled code
// cached at build time (see bin/combine); the daemon keeps its dependencies external (better-sqlite3 is
// native; start-up time matters less).
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

/**
 * commander requires child_process at load for sub-commands run as executables, which combine has none
 * of: loading it lazily saves every CLI run a few ms. Only commander's own import is replaced.
 */
const lazyChildProcessForCommander = {
  name: 'lazy-child-process-for-commander',
  setup(b) {
    b.onResolve({ filter: /^(node:)?child_process$/ }, (args) =>
      /[\\/]node_modules[\\/]commander[\\/]/.test(args.importer) ? { path: 'child_process', namespace: 'lazy-builtin' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, () => ({
      contents: "let m; module.exports = new Proxy({}, { get: (_, k) => (m ??= require('node:child_process'))[k] });",
      loader: 'js',
    }));
  },
};

/**
 * zod's `locales` namespace (error messages in ~50 languages, ~450 KB of the CLI bundle) is re-exported by
 * `z` itself, so esbuild cannot drop it; combine sets no locale (zod registers English by itself), so the
 * CLI bundle gets a namespace with English only. Every CLI run reads and compiles less.
 */
const englishOnlyZodLocales = {
  name: 'english-only-zod-locales',
  setup(b) {
    b.onResolve({ filter: /^\.\.\/locales\/index\.js$/ }, (args) =>
      /[\\/]node_modules[\\/]zod[\\/]/.test(args.importer) ? { path: 'zod-locales', namespace: 'english-only' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'english-only' }, () => ({
      contents: "export { default as en } from 'zod/v4/locales/en.js';",
      resolveDir: root,
      loader: 'js',
    }));
  },
};

/**
 * The CLI: dist/cli.cjs, one CommonJS file with everything it may load (a command's rarely used parts
 * are still only run, and compiled, when used), the key of its code cache appended; dist/cli.js, the
 * ES module entry kept for `node dist/cli.js` and the daemon's start, loads it through bin/combine; then
 * one run of the CLI (scripts/cli-code-cache.mjs) writes the code cache.
 */
async function buildCli() {
  // Earlier builds' CLI files that this one does not write again; the ones it writes are replaced in place,
  // never removed first (a CLI started meanwhile finds one or the other).
  const written = new Set(['cli.js', 'cli.cjs', 'cli.cjs.map', 'cli.cjs.cache']);
  for (const f of readdirSync(`${root}${outdir}`)) if (/^cli[-.]/.test(f) && !written.has(f)) rmSync(`${root}${outdir}/${f}`);
  const result = await build({
    ...common,
    format: 'cjs',
    entryPoints: { cli: 'src/cli/main.ts' },
    outdir,
    outExtension: { '.js': '.cjs' },
    write: false,
    // The ES sources' import.meta.url (files next to the bundle: cli.js, daemon.js, sim.js, examples/).
    define: { ...common.define, 'import.meta.url': '__combine_cli_url' },
    banner: { js: "const __combine_cli_url = require('node:url').pathToFileURL(__filename).href;" },
    // ws's optional native speed-ups are not installed; the daemon and simulator are loaded lazily.
    external: ['bufferutil', 'utf-8-validate', './daemon.js', './sim.js'],
    plugins: [lazyChildProcessForCommander, englishOnlyZodLocales],
    minifyWhitespace: true,
    minifySyntax: true,
  });
  for (const out of result.outputFiles) {
    let text = out.text;
    // import() in a script compiled by vm with a code cache has no loader on Node 20: the bundle's dynamic
    // imports (node built-ins, daemon.js, sim.js, a user's operation module: absolute URLs) go through
    // bin/combine's own import(), which it passes in.
    if (out.path.endsWith('.cjs')) text = text.replaceAll('await import(', 'await __combine_import(');
    if (out.path.endsWith('.cjs')) text += `//# combine-cache-key=${createHash('sha256').update(text).digest('hex').slice(0, 32)}\n`;
    writeFileSync(out.path, text);
  }
  writeFileSync(
    `${root}${outdir}/cli.js`,
    [
      '// Written by scripts/build.mjs: the CLI is dist/cli.cjs, loaded by bin/combine with its code cache.',
      "import { createRequire } from 'node:module';",
      "import { fileURLToPath } from 'node:url';",
      "createRequire(import.meta.url)('../bin/combine').boot(fileURLToPath(new URL('.', import.meta.url)));",
      '',
    ].join('\n'),
  );
  rmSync(`${root}${outdir}/cli.cjs.cache`, { force: true });
  try {
    execFileSync(process.execPath, [`${root}scripts/cli-code-cache.mjs`, `${root}${outdir}`], { stdio: 'ignore' });
  } catch (err) {
    if (err.status !== 3) throw err; // 3: no daemon, as intended
  }
  if (!existsSync(`${root}${outdir}/cli.cjs.cache`)) throw new Error(`${outdir}/cli.cjs.cache was not written`);
}

mkdirSync(`${root}${outdir}`, { recursive: true });
if (!testHooks) writeOperationTypes();
await Promise.all([
  buildCli(),
  build({
    ...common,
    // read-worker: the control plane's worker thread (ledger verify/export), started by the daemon next to it.
    entryPoints: {
      daemon: 'src/daemon/main.ts',
      // The daemon process's own entry (what `combine daemon start` and the systemd unit run): no CLI code.
      'daemon-run': 'src/daemon/daemon-run.ts',
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
