/**
 * The daemon's storage, as configuration chooses it (config/database.ts): SQLite in COMBINE_HOME — one
 * writer connection with group commit, a read-only reader, idle maintenance — or Postgres at
 * `database.url` — a pool of connections for writes (a transaction each), another for reads. Either way
 * the rest of the daemon sees the same three things: a reader (`Sql`), a writer (`TxRunner`) and the
 * migrations' status. Wiring only: what each part does is in db/ and db/pg/.
 */
import type { Clock } from '../core/clock.js';
import type { Logger } from '../core/logger.js';
import type { Sql } from '../core/sql.js';
import type { TxRunner } from '../core/tx.js';
import { type Db, openDatabase } from '../db/connection.js';
import { forgetDocuments, shareDocumentCache } from '../db/document-cache.js';
import { applyMigrations, migrationStatus } from '../db/migrate.js';
import { openPostgresPool } from '../db/pg/connection.js';
import { pgMigrationStatus } from '../db/pg/migrate.js';
import { type Notification, type NotificationHandlers, PgListener } from '../db/pg/notifications.js';
import { PgSql } from '../db/pg/sql.js';
import { PgWriter } from '../db/pg/writer.js';
import { SqliteSql } from '../db/sql.js';
import { Writer } from '../db/writer.js';
import type { DaemonConfig } from './config/config.js';
import { redactDatabaseUrl } from './config/database.js';
import type { ReadTarget } from './control-plane/read-jobs.js';
import { Maintenance, type MaintenanceOptions, type MaintenanceResult } from './runtime/maintenance.js';

/** What the composition root wants told about writes. */
export interface WriteObservers<E> {
  publish: (events: E[]) => void;
  onCommit: (info: { writes: number; commitMs: number }) => void;
  onInfraFailure: (err: unknown) => void;
  onInfraRecovered: () => void;
  /** What other daemons on a shared database are told of a write's events (Postgres only; see db/pg/notifications.ts). */
  notificationsOf?: (events: E[]) => Notification[];
}

/** A running LISTEN session on the shared database. */
export interface Listening {
  /** Listens to one more channel; resolved once notifications committed from then on reach this session (db/pg/notifications.ts). */
  listenAlso(channel: string): Promise<void>;
  unlisten(channel: string): Promise<void>;
  close(): Promise<void>;
}

/** Idle upkeep of the database files (SQLite: WAL checkpoint, incremental vacuum); none on Postgres. */
export interface StorageMaintenance {
  start(): void;
  stop(): void;
  noteActivity(): void;
  run(): Promise<MaintenanceResult>;
}

export interface DaemonStorage<E> {
  readonly dialect: Sql['dialect'];
  /**
   * Whether this daemon is the database's only user (SQLite in its home, guarded by the home lock), or
   * shares it with other daemons (Postgres). Decides what recovery may take and what must run once.
   */
  readonly exclusive: boolean;
  /** Every read that is not part of a write: it sees committed rows only. */
  readonly reader: Sql;
  readonly writer: TxRunner<E>;
  /** Where the control plane's worker opens its own connection (ledger verify, export, prune preview). */
  readonly readTarget: ReadTarget;
  /** Where the state is, for people: the SQLite file, or the Postgres URL with its password redacted. */
  readonly location: string;
  /** Applied and pending migrations of the schema this daemon ships. */
  migrations(): Promise<{ applied: number; pending: number }>;
  /** Built after the engine (it waits for calls in flight): SQLite's idle maintenance, or nothing. */
  maintenance(d: { logger: Logger; clock: Clock; calls: { readonly inFlightCount: number }; observer?: MaintenanceOptions['observer'] }): StorageMaintenance;
  /**
   * Listens for other daemons' notifications on a shared database (Postgres: a dedicated session that
   * reconnects on its own); null on SQLite, where one daemon owns the file and in-process events suffice.
   */
  listen(channels: string[], handlers: NotificationHandlers): Promise<Listening> | null;
  /** The SQLite writer's connection (in-process tests and benchmarks look at it); null on Postgres. */
  readonly sqliteDb: Db | null;
  close(): Promise<void>;
}

/** Opens the configured storage. SQLite: migrations applied here too (main.ts applied them first, with a backup). */
export function openDaemonStorage<E>(config: DaemonConfig, logger: Logger, observers: WriteObservers<E>): DaemonStorage<E> {
  return config.databaseUrl === null ? openSqliteStorage(config, observers) : openPostgresStorage(config.databaseUrl, logger, observers);
}

function openSqliteStorage<E>(config: DaemonConfig, observers: WriteObservers<E>): DaemonStorage<E> {
  const folder = config.migrationsDir ?? undefined;
  const db = openDatabase(config.dbPath, { busyTimeoutMs: config.busyTimeoutMs });
  applyMigrations(db, folder);
  const readerDb = openDatabase(config.dbPath, { readonly: true, busyTimeoutMs: config.busyTimeoutMs });
  const writer = new Writer<E>(db, { ...observers, onRollback: (connection) => forgetDocuments({ connection }) });
  return {
    dialect: 'sqlite',
    exclusive: true,
    reader: new SqliteSql(readerDb),
    writer,
    readTarget: { kind: 'sqlite', dbPath: config.dbPath, busyTimeoutMs: config.busyTimeoutMs },
    location: config.dbPath,
    migrations: async () => migrationStatus(readerDb, folder),
    maintenance: (d) => new Maintenance({ ...d, db, writer, walPath: `${config.dbPath}-wal`, idleMs: config.maintenanceIdleMs }),
    listen: () => null,
    sqliteDb: db,
    close: async () => {
      await writer.close();
      readerDb.close();
      db.close();
    },
  };
}

/** Connections per daemon: writes run in parallel on their own; reads are short statements. */
const WRITE_CONNECTIONS = 8;
const READ_CONNECTIONS = 4;

function openPostgresStorage<E>(url: string, logger: Logger, observers: WriteObservers<E>): DaemonStorage<E> {
  const location = redactDatabaseUrl(url);
  // An idle pooled connection the server closed (a restart, a network cut) reports here; the pool drops
  // it and the next statement opens a new one. Without a listener the error would end the process.
  const onIdleError = (err: Error) =>
    logger.warn({ err: { message: err.message, code: (err as { code?: string }).code } }, 'an idle Postgres connection failed');
  const writePool = openPostgresPool(url, { max: WRITE_CONNECTIONS }).on('error', onIdleError);
  const readPool = openPostgresPool(url, { max: READ_CONNECTIONS }).on('error', onIdleError);
  // Both pools' connections share one document cache (db/document-cache.ts).
  const documents = {};
  shareDocumentCache(readPool, documents);
  writePool.on('connect', (client) => shareDocumentCache(client, documents));
  const reader = new PgSql(readPool);
  const writer = new PgWriter<E>(writePool, { ...observers, onRollback: (connection) => forgetDocuments({ connection }) });
  return {
    dialect: 'postgres',
    exclusive: false,
    reader,
    writer,
    readTarget: { kind: 'postgres', url },
    location,
    migrations: () => pgMigrationStatus(reader),
    maintenance: () => noMaintenance,
    listen: async (channels, handlers) => {
      const listener = new PgListener(url, channels, handlers);
      await listener.start();
      return listener;
    },
    sqliteDb: null,
    close: async () => {
      await writer.close();
      await writePool.end();
      await readPool.end();
    },
  };
}

/** Postgres vacuums itself (autovacuum) and its WAL is the server's: nothing to do between writes. */
const noMaintenance: StorageMaintenance = {
  start: () => {},
  stop: () => {},
  noteActivity: () => {},
  run: async () => ({ converted_to_incremental: false, freed_pages: 0, wal_bytes_before: 0, wal_bytes_after: 0, checkpoint_busy: false }),
};
