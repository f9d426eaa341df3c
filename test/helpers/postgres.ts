/**
 * A fresh database per test file or harness on the run's one Postgres server (postgres-setup.ts):
 * created empty (~0.1 s) or as a copy of the run's migrated template, dropped with its connections at
 * the end, so tests never share state.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';
import { openPostgresPool } from '../../src/db/pg/connection.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter, type PgWriterOptions } from '../../src/db/pg/writer.js';
import { adminQuery, databaseUrl, socketUrl } from './postgres-server.js';

export interface TestDatabase {
  /** Connection URL of the new database (loopback TCP). */
  url: string;
  /** The same database through the server's Unix socket. */
  socketUrl: string;
  name: string;
  /** Drops the database, ending any session still connected to it (a killed daemon's included). */
  drop(): Promise<void>;
}

/**
 * A new database: empty, or with `migrated` a copy of the run's migrated template (a daemon started on
 * it finds nothing pending, as on any database it has run on before).
 */
export async function createTestDatabase(opts: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const adminUrl = inject('postgresAdminUrl');
  const name = `combine_test_${randomBytes(6).toString('hex')}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${name}${opts.migrated ? ` TEMPLATE ${inject('postgresTemplate')}` : ''}`);
  const url = databaseUrl(adminUrl, name);
  return {
    url,
    socketUrl: socketUrl(url, inject('postgresSocketDir')),
    name,
    drop: () => adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`),
  };
}

/**
 * A pool for a test's own statements. `pool.end()` resolves before its clients' goodbyes reach the server,
 * so the `DROP DATABASE … WITH (FORCE)` that follows can terminate one first (57P01): that error is the drop's
 * doing and is ignored; any other idle-client error still surfaces as an uncaught error.
 */
export function openTestPool(url: string, max: number): pg.Pool {
  return openPostgresPool(url, { max }).on('error', (err: Error & { code?: string }) => {
    if (err.code !== '57P01') throw err;
  });
}

/** A file's migrated database, with one pool and a reader and a writer on it (`useTestWriter`). */
export interface TestWriter {
  readonly database: TestDatabase;
  /** Statements outside the writer: each on a connection of the pool the writer's transaction does not hold. */
  readonly reader: PgSql;
  readonly writer: PgWriter<never>;
}

/** A migrated database for this file's tests, with a pool of `max` connections: made before them, dropped after. */
export function useTestWriter(max: number, options: PgWriterOptions<never> = {}): TestWriter {
  let made: { database: TestDatabase; pool: pg.Pool; reader: PgSql; writer: PgWriter<never> } | undefined;
  beforeAll(async () => {
    const database = await createTestDatabase({ migrated: true });
    const pool = openTestPool(database.url, max);
    made = { database, pool, reader: new PgSql(pool), writer: new PgWriter<never>(pool, options) };
  });
  afterAll(async () => {
    await made?.writer.close();
    await made?.pool.end();
    await made?.database.drop();
  });
  return {
    get database() {
      return made!.database;
    },
    get reader() {
      return made!.reader;
    },
    get writer() {
      return made!.writer;
    },
  };
}
