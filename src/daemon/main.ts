/**
 * The daemon process (`combine daemon run`): one per COMBINE_HOME, the only writer of its database.
 *
 * Start-up order: single-daemon lock → config → logs → database + migrations → socket → pid file →
 * recovery scan → engine. Shutdown (SIGTERM, SIGINT, `combine daemon stop`): stop claiming, drain
 * in-flight calls up to the drain timeout, leave the rest to the next start's recovery, exit 0.
 */
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, readFileSync, realpathSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { openDatabase } from '../db/connection.js';
import { applyMigrations, backupDatabase, migrationStatus } from '../db/migrate.js';
import { App } from './app.js';
import { ConfigError, loadConfig, type DaemonConfig } from './config.js';
import { createEventLog, createLogger, type Logger } from './logger.js';
import { startMetricsServer, type MetricsServer } from './metrics-server.js';
import { startApiServer } from './server.js';
import { HttpService } from './http/service.js';
import { createDashboard } from '../web/dashboard.js';

/** sockaddr_un.sun_path is 104 bytes on macOS and 108 on Linux, including the terminating NUL. */
export const MAX_SOCKET_PATH_BYTES = 103;

export class DaemonStartError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
    this.name = 'DaemonStartError';
  }
}

/** Creates the home 0700 (or tightens a home we created earlier with looser bits). */
export function ensureHome(home: string): void {
  mkdirSync(home, { recursive: true, mode: 0o700 });
  const mode = statSync(home).mode & 0o777;
  if (mode & 0o077) chmodSync(home, 0o700);
}

/**
 * Holds a Linux abstract-namespace socket named after the home: the kernel releases it when the
 * process dies (even by SIGKILL), so it is a crash-proof "one daemon per home" lock with no stale file.
 */
function acquireHomeLock(home: string): Promise<net.Server | null> {
  if (process.platform !== 'linux') return Promise.resolve(net.createServer());
  const name = `\0combine-daemon-${createHash('sha256').update(realpathSync(home)).digest('hex').slice(0, 32)}`;
  return new Promise((resolve, reject) => {
    const lock = net.createServer();
    lock.once('error', (err: NodeJS.ErrnoException) => (err.code === 'EADDRINUSE' ? resolve(null) : reject(err)));
    lock.listen(name, () => {
      lock.unref();
      resolve(lock);
    });
  });
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
  const db = openDatabase(config.dbPath, { busyTimeoutMs: config.busyTimeoutMs });
  const folder = config.migrationsDir ?? undefined;
  let backup: string | null = null;
  try {
    const status = migrationStatus(db, folder);
    if (status.pending === 0) return;
    if (status.applied > 0) {
      backup = await backupDatabase(db, config.backupsDir, Date.now(), status.applied);
      logger.info({ backup, pending: status.pending }, 'backed up the database before migrating');
    }
    applyMigrations(db, folder);
    logger.info({ applied: status.pending }, 'migrations applied');
  } catch (err) {
    logger.fatal({ err, backup }, 'migration failed; the database was left as it was');
    throw new DaemonStartError(
      `cannot start: migrating ${config.dbPath} failed: ${(err as Error).message}
` +
        `No migration was applied; the database is as it was${backup ? ` (a backup taken just before is at ${backup})` : ''}.`,
      1,
    );
  } finally {
    db.close();
  }
}

/** Runs the daemon in this process until it is stopped. Throws DaemonStartError if it cannot start. */
export async function runDaemon(opts: RunOptions): Promise<void> {
  const env = opts.env ?? process.env;
  ensureHome(opts.home);
  let config;
  try {
    config = loadConfig(opts.home, env);
  } catch (err) {
    if (err instanceof ConfigError) throw new DaemonStartError(`invalid configuration: ${err.message}`, 2);
    throw err;
  }
  if (Buffer.byteLength(config.socketPath) > MAX_SOCKET_PATH_BYTES) {
    throw new DaemonStartError(
      `the socket path ${config.socketPath} is ${Buffer.byteLength(config.socketPath)} bytes, over the ${MAX_SOCKET_PATH_BYTES}-byte limit of Unix sockets; choose a shorter COMBINE_HOME`,
      2,
    );
  }
  const lock = await acquireHomeLock(opts.home);
  if (!lock) {
    const pid = readPid(config.pidPath);
    throw new DaemonStartError(`a daemon is already running for ${opts.home}${pid ? ` (pid ${pid})` : ''}`, 1);
  }

  const logger = createLogger(config.logPath, env.COMBINE_LOG_LEVEL || 'info');
  let app: App;
  try {
    await migrateDatabase(config, logger);
    app = new App({ config, logger, eventLog: createEventLog(config.logPath, env.COMBINE_LOG_LEVEL || 'info') });
  } catch (err) {
    lock.close();
    if (err instanceof DaemonStartError) throw err;
    logger.fatal({ err }, 'cannot open or migrate the database');
    throw new DaemonStartError(`cannot open or migrate ${config.dbPath}: ${(err as Error).message}`, 1);
  }

  let stopping: Promise<void> | null = null;
  const stop = (reason: string) => {
    stopping ??= (async () => {
      logger.info({ reason }, 'shutting down: no new claims, draining in-flight calls');
      const { abandoned } = await app.shutdown(config.drainTimeoutMs);
      if (abandoned > 0) logger.warn({ abandoned }, 'calls still in flight at exit; the recovery scan will resume them');
      await server.close();
      await http.close();
      await metricsServer?.close();
      for (const f of [config.socketPath, config.pidPath]) if (existsSync(f)) unlinkSync(f);
      logger.info('stopped');
      lock.close();
      process.exit(0);
    })();
    return stopping;
  };

  const http = new HttpService({ app, home: opts.home, logger, dashboard: createDashboard() }, config.httpPort);
  const metricsPort = opts.metricsPort ?? config.metricsPort;
  const httpPort = opts.httpPort ?? config.httpPort;
  let metricsServer: MetricsServer | null = null;
  // The ports first, the socket last: a client that sees the socket answer must find a daemon that
  // stays up, not one about to exit because a port was taken.
  try {
    if (metricsPort !== null) metricsServer = await startMetricsServer(app.metrics, metricsPort);
    if (httpPort !== null) await http.serve(httpPort);
  } catch (err) {
    await metricsServer?.close();
    await http.close();
    await app.shutdown(0);
    lock.close();
    const what = metricsPort !== null && metricsServer === null ? `cannot serve metrics on 127.0.0.1:${metricsPort}: ` : '';
    throw new DaemonStartError(`${what}${(err as Error).message}`, 1);
  }
  const server = await startApiServer(config.socketPath, { app, requestStop: () => void stop('stop command'), http });
  writeFileSync(config.pidPath, `${process.pid}\n`, { mode: 0o600 });
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  process.on('uncaughtException', (err) => crash(logger, err));
  process.on('unhandledRejection', (err) => logger.error({ err }, 'unhandled rejection'));

  logger.info(
    { socket: config.socketPath, db: config.dbPath, metrics: metricsServer ? `http://127.0.0.1:${metricsServer.port}/metrics` : null, http: http.current()?.url ?? null, provider: config.provider.baseURL, model: config.provider.model, max_in_flight: config.maxInFlight },
    'daemon started',
  );
  await app.start();
}

function crash(logger: Logger, err: unknown): never {
  logger.fatal({ err }, 'uncaught exception; exiting (the recovery scan resumes work at the next start)');
  process.exit(1);
}
