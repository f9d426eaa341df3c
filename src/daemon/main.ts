/**
 * The daemon process (`combine daemon run`): one per COMBINE_HOME — the only writer of its SQLite
 * database, or one of several daemons sharing a Postgres database (config `database.url`).
 *
 * Start-up order: single-daemon lock → config → logs → database + migrations → socket → pid file →
 * recovery scan → engine. Shutdown (SIGTERM, SIGINT, `combine daemon stop`): stop claiming, drain
 * in-flight calls up to the drain timeout, leave the rest to the next start's recovery, exit 0.
 */
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { openDatabase } from '../db/connection.js';
import { applyMigrations, backupDatabase, migrationStatus } from '../db/migrate.js';
import { applyPgMigrations } from '../db/pg/migrate.js';
import { redactValues } from '../domain/errors.js';
import { redactDatabaseUrl } from './config/database.js';
import { loadOperations } from '../operations/loader.js';
import type { OperationRegistry } from '../operations/registry.js';
import { App } from './app.js';
import { canaryDefinition } from './canary/canary-operation.js';
import { loadConfig, operationSettingsOf, type DaemonConfig } from './config/config.js';
import { acquireHomeLock } from './runtime/home-lock.js';
import { checkClockSkew } from './runtime/clock-skew.js';
import { createEventLog, createLogger, LogFile } from './runtime/logger.js';
import { startMetricsServer, type MetricsServer } from './runtime/metrics-server.js';
import { createTracer } from './tracing/tracer.js';
import { startApiServer } from './server.js';
import { HttpService } from './http/service.js';
import { createDashboard } from '../web/dashboard.js';
import { isDiskFull } from './runtime/storage-guard.js';
import { crashHooks } from './test-hooks.js';
import { OperationDefinitionError, ConfigError } from '../core/errors.js';
import { DaemonStartError } from '../core/errors.js';
import type { Logger } from '../core/logger.js';
import { systemClock } from '../core/clock.js';
import { VERSION } from '../core/version.js';

/** The CLI loads this bundle lazily and tells a start failure (exit code) from a crash by this class. */
export { DaemonStartError };

/** sockaddr_un.sun_path is 104 bytes on macOS and 108 on Linux, including the terminating NUL. */
export const MAX_SOCKET_PATH_BYTES = 103;

/** Creates the home 0700 (or tightens a home we created earlier with looser bits). */
export function ensureHome(home: string): void {
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const mode = statSync(home).mode & 0o777;
  if (mode & 0o077) chmodSync(home, 0o700);
}

function readPid(pidPath: string): number | null {
  try {
    const pid = Number(readFileSync(pidPath, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : null;
  } catch {
    return null;
  }
}

export interface RunOptions {
  home: string;
  env?: NodeJS.ProcessEnv;
  /** Serve /metrics on 127.0.0.1:<port> (overrides config.json's metrics.port). */
  metricsPort?: number;
  /** Serve the HTTP API and dashboard on 127.0.0.1:<port> (overrides config.json's http.port; 0: any free port). */
  httpPort?: number;
}

/**
 * Brings the database schema up to date before anything else opens it. An existing database with
 * pending migrations is first copied (online backup, the newest 3 kept in COMBINE_HOME/backups/).
 * All pending migrations run in one transaction: if one fails, nothing is applied, the database file
 * is as it was, and the daemon does not start.
 */
async function migrateDatabase(config: DaemonConfig, logger: Logger): Promise<void> {
  if (config.databaseUrl !== null) return migratePostgres(config, config.databaseUrl, logger);
  const db = openDatabase(config.dbPath, { busyTimeoutMs: config.busyTimeoutMs });
  const folder = config.migrationsDir ?? undefined;
  let backup: string | null = null;
  try {
    const status = migrationStatus(db, folder);
    if (status.pending === 0) return;
    if (status.applied > 0) {
      backup = await backupDatabase(db, config.backupsDir, systemClock.now(), status.applied);
      logger.info({ backup, pending: status.pending }, 'backed up the database before migrating');
    }
    applyMigrations(db, folder);
    logger.info({ applied: status.pending }, 'migrations applied');
  } catch (err) {
    logger.fatal({ err, backup }, 'migration failed; the database was left as it was');
    throw new DaemonStartError(
      `cannot start: migrating ${config.dbPath} failed: ${(err as Error).message}
` + `No migration was applied; the database is as it was${backup ? ` (a backup taken just before is at ${backup})` : ''}.`,
      1,
    );
  } finally {
    db.close();
  }
}

/**
 * Postgres: applies `migrations/pg/` under the migrations' advisory lock, so daemons starting together
 * migrate once (one transaction: a failing migration leaves the schema as it was). Backups of a shared
 * server are its operator's, not a daemon's. The URL is shown with its password redacted. Then the
 * clock check (runtime/clock-skew.ts): a daemon whose clock is off refuses to start.
 */
async function migratePostgres(config: DaemonConfig, url: string, logger: Logger): Promise<void> {
  const where = redactDatabaseUrl(url);
  try {
    const { applied } = await applyPgMigrations(url);
    if (applied > 0) logger.info({ applied, database: where }, 'migrations applied');
    await checkClockSkew(url, systemClock, config.maxClockSkewMs, where);
  } catch (err) {
    if (err instanceof DaemonStartError) {
      logger.fatal({ database: where, reason: err.message }, 'clock skew with the database server');
      throw err;
    }
    const reason = redactValues((err as Error).message, config.secrets);
    logger.fatal({ database: where, reason }, 'cannot connect to or migrate the database');
    throw new DaemonStartError(`cannot start: connecting to or migrating ${where} failed: ${reason}`, 1);
  }
}

/** Runs the daemon in this process until it is stopped. Throws DaemonStartError if it cannot start. */
export async function runDaemon(opts: RunOptions): Promise<void> {
  const env = opts.env ?? process.env;
  ensureHome(opts.home);
  let config: ReturnType<typeof loadConfig>;
  try {
    config = loadConfig(opts.home, env);
  } catch (err) {
    if (err instanceof ConfigError) throw new DaemonStartError(`invalid configuration: ${err.message}`, 2);
    throw err;
  }
  // Operations load before anything starts: a bad module stops the daemon here, naming its file and field.
  let operations: OperationRegistry;
  try {
    operations = await loadOperations(opts.home, config.operationModules, operationSettingsOf(config), [canaryDefinition()]);
  } catch (err) {
    if (err instanceof OperationDefinitionError) throw new DaemonStartError(`invalid operation: ${err.message}`, 2);
    throw err;
  }
  if (Buffer.byteLength(config.socketPath) > MAX_SOCKET_PATH_BYTES) {
    throw new DaemonStartError(
      `the socket path ${config.socketPath} is ${Buffer.byteLength(config.socketPath)} bytes, over the ${MAX_SOCKET_PATH_BYTES}-byte limit of Unix sockets; choose a shorter COMBINE_HOME`,
      2,
    );
  }
  let lock: ReturnType<typeof acquireHomeLock>;
  try {
    lock = acquireHomeLock(opts.home);
  } catch (err) {
    throw new DaemonStartError(`cannot take the one-daemon lock ${opts.home}/daemon.lock: ${(err as Error).message} (remove the file if no daemon runs)`, 1);
  }
  if (!lock) {
    const pid = readPid(config.pidPath);
    throw new DaemonStartError(`a daemon is already running for ${opts.home}${pid ? ` (pid ${pid})` : ''}`, 1);
  }

  // stdout and stderr are daemon.log too: a failed write there (disk full) must not become a crash.
  for (const stream of [process.stdout, process.stderr]) stream.on('error', () => {});
  let app: App | undefined;
  const logFile = new LogFile(config.logPath, config.secrets, (err) => app?.storage.noteWriteFailure(err));
  const logger = createLogger(config.logPath, config.logLevel, logFile);
  try {
    await migrateDatabase(config, logger);
    const tracer = await createTracer(config.otel, VERSION, logger);
    app = new App({ config, logger, logFile, operations, tracer, eventLog: createEventLog(logFile, config.logLevel), crashAt: crashHooks(env, logger) });
    try {
      await app.joinSharedDatabase();
    } catch (err) {
      const refused = err instanceof ConfigError;
      const reason = refused ? err.message : `registering in the shared database failed: ${redactValues((err as Error).message, config.secrets)}`;
      logger.fatal({ reason }, 'refusing to start');
      await app.shutdown(0).catch(() => undefined);
      throw new DaemonStartError(`cannot start: ${reason}`, refused ? 2 : 1);
    }
  } catch (err) {
    lock.release();
    if (err instanceof DaemonStartError) throw err;
    logger.fatal({ err }, 'cannot open or migrate the database');
    // Opening a database that was closed cleanly creates its shared-memory index (32 KiB): not on a full disk.
    if (isDiskFull(err) || (err as { code?: string }).code === 'SQLITE_IOERR_SHMSIZE') {
      throw new DaemonStartError(
        `cannot open ${config.dbPath}: the file system of ${opts.home} is full (opening the database needs a few KiB); free some space and start again`,
        1,
      );
    }
    throw new DaemonStartError(`cannot open or migrate ${config.dbPath}: ${(err as Error).message}`, 1);
  }

  const running = app;
  let stopping: Promise<void> | null = null;
  const stop = (reason: string) => {
    stopping ??= (async () => {
      logger.info({ reason }, 'shutting down: no new claims, draining in-flight calls');
      const { abandoned } = await running.shutdown(config.drainTimeoutMs);
      if (abandoned > 0) logger.warn({ abandoned }, 'calls still in flight at exit; the recovery scan will resume them');
      await server.close();
      await http.close();
      await metricsServer?.close();
      for (const f of [config.socketPath, config.pidPath]) if (existsSync(f)) unlinkSync(f);
      logger.info('stopped');
      lock.release();
      process.exit(0);
    })();
    return stopping;
  };

  const http = new HttpService({ services: running, home: opts.home, logger, dashboard: createDashboard() }, config.httpPort);
  const metricsPort = opts.metricsPort ?? config.metricsPort;
  const httpPort = opts.httpPort ?? config.httpPort;
  let metricsServer: MetricsServer | null = null;
  // The ports first, the socket last: a client that sees the socket answer must find a daemon that
  // stays up, not one about to exit because a port was taken.
  try {
    if (metricsPort !== null) metricsServer = await startMetricsServer(running.metrics, metricsPort);
    if (httpPort !== null) await http.serve(httpPort);
  } catch (err) {
    await metricsServer?.close();
    await http.close();
    await running.shutdown(0);
    lock.release();
    const what = metricsPort !== null && metricsServer === null ? `cannot serve metrics on 127.0.0.1:${metricsPort}: ` : '';
    throw new DaemonStartError(`${what}${(err as Error).message}`, 1);
  }
  const server = await startApiServer(config.socketPath, { services: running, requestStop: () => void stop('stop command'), http }, config.api);
  writePidFile(config.pidPath, logger);
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('uncaughtException', (err) => crash(logger, err));
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));

  logger.info(
    {
      socket: config.socketPath,
      db: config.databaseUrl === null ? config.dbPath : redactDatabaseUrl(config.databaseUrl),
      operations: operations.list().map((o) => o.name),
      metrics: metricsServer ? `http://127.0.0.1:${metricsServer.port}/metrics` : null,
      http: http.current()?.url ?? null,
      provider: config.provider.baseURL,
      model: config.provider.model,
      max_in_flight: config.maxInFlight,
    },
    'daemon started',
  );
  await running.start();
}

/**
 * The pid file, for `combine daemon stop/status`. On a full disk it cannot be written: an old one is
 * removed (it would name a dead process) and writing is tried again until it succeeds.
 */
function writePidFile(path: string, logger: Logger): void {
  try {
    writeFileSync(path, `${process.pid}\n`, { mode: 0o600 });
  } catch (err) {
    try {
      unlinkSync(path);
    } catch {
      // none there
    }
    logger.warn({ err }, 'cannot write the pid file yet; retrying');
    setTimeout(() => writePidFile(path, logger), 5000).unref();
  }
}

function crash(logger: Logger, err: unknown): never {
  logger.fatal({ err }, 'uncaught exception; exiting (the recovery scan resumes work at the next start)');
  process.exit(1);
}
