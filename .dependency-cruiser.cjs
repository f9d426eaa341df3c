/**
 * The layering of combine, written as rules (`npm run lint:deps`, part of `npm test`):
 *   core      — types and helpers everyone may see (clock, ids, errors, Tx); imports nothing of ours.
 *   domain    — pure rules: no I/O, no storage, no daemon.
 *   storage   — db/ and the ledger's store: core and domain only, never the daemon, engine or CLI.
 *   ledger    — the chain's rules (chain, gaps, completeness, export format) are pure; verify reads the
 *               store; transfer and replay write through the engine's transaction.
 *   engine    — imports storage, domain, core and the operations' API; never the CLI, the services or the
 *               transports (router, HTTP, web).
 *   cli       — talks to the daemon over its client: imports the daemon's types only.
 * And no import cycle anywhere.
 */
module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle (type-only ones included) makes the layering a knot.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'core-imports-nothing-of-ours',
      severity: 'error',
      from: { path: '^src/core/' },
      to: { path: '^src/', pathNot: '^src/core/' },
    },
    {
      name: 'domain-is-pure',
      severity: 'error',
      comment: 'The domain is rules over values: no storage, no daemon, no operations, no CLI.',
      from: { path: '^src/domain/' },
      to: { path: '^src/(db|ledger|daemon|cli|operations|sim|web)/' },
    },
    {
      name: 'domain-does-no-io',
      severity: 'error',
      comment: 'No files, sockets, processes or threads in the domain: I/O lives in storage and the daemon.',
      from: { path: '^src/domain/' },
      to: { dependencyTypes: ['core'], path: '^(node:)?(fs|fs/promises|net|http|https|http2|child_process|cluster|dgram|dns|tls|worker_threads|readline)$' },
    },
    {
      name: 'storage-imports-no-daemon-engine-or-cli',
      severity: 'error',
      comment: 'db/ and the ledger store are the storage layer: they see core and domain, never what sits above them.',
      from: { path: '^src/db/|^src/ledger/(store|imports-store)\\.ts$' },
      to: { path: '^src/(daemon|cli|web)/|^src/ledger/(transfer|replay)\\.ts$' },
    },
    {
      name: 'ledger-rules-are-pure',
      severity: 'error',
      comment: "The chain's rules (hashing, gaps, completeness, the export format, summaries) are values in, values out.",
      from: { path: '^src/ledger/(chain|gaps|completeness|export-format|summary)\\.ts$' },
      to: { path: '^src/(db|daemon|cli|web|operations|sim)/|^src/ledger/(store|imports-store|transfer|replay|verify)\\.ts$' },
    },
    {
      name: 'engine-imports-no-transport-or-service',
      severity: 'error',
      from: { path: '^src/daemon/engine/' },
      to: { path: '^src/(cli|web)/|^src/daemon/(services|http|scheduler)/|^src/daemon/(app|router|server|main)\\.ts$' },
    },
    {
      name: 'cli-imports-daemon-types-only',
      severity: 'error',
      comment:
        'The CLI talks to the daemon through its client; from the daemon it takes types, never code. One exception: ' +
        '`combine doctor` checks config.json with the daemon\'s own parser, so that it says what the daemon would.',
      from: { path: '^src/cli/', pathNot: '^src/cli/doctor\\.ts$' },
      to: { path: '^src/(daemon|db|ledger|web)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'doctor-imports-only-the-config-parser',
      severity: 'error',
      from: { path: '^src/cli/doctor\\.ts$' },
      to: { path: '^src/(daemon|db|ledger|web)/', pathNot: '^src/daemon/config/config\\.ts$', dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.js'] },
  },
};
