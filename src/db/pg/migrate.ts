/**
 * The Postgres migrations runner: applies `migrations/pg/` (drizzle-kit's SQL from ./schema.ts plus
 * hand-written plpgsql) at daemon start. Several daemons may start together against one database, so
 * the whole run holds a session-level advisory lock: the first daemon migrates, the others wait for it
 * and then find nothing pending. drizzle runs the pending migrations in one transaction, so a failing
 * one leaves the schema as it was; if the daemon dies, its session ends and the lock with it.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import type pg from 'pg';
import type { Sql } from '../../core/sql.js';
import { defaultMigrationsFolder } from '../migrate.js';
import { connectPostgres } from './connection.js';

/** The advisory lock key of migrations: an arbitrary constant (`combine` in ASCII) every daemon shares. */
export const MIGRATIONS_LOCK_KEY = 0x636f6d62696e65n;

/** `migrations/pg/`, found from wherever this module was loaded (source under vitest, or dist/). */
export function defaultPgMigrationsFolder(): string {
  const folder = join(defaultMigrationsFolder(), 'pg');
  if (!existsSync(join(folder, 'meta', '_journal.json'))) throw new Error(`cannot find the Postgres migrations (${folder}/meta/_journal.json)`);
  return folder;
}

async function appliedCount(client: pg.Client): Promise<number> {
  const table = await client.query("SELECT to_regclass('drizzle.__drizzle_migrations') AS t");
  if (table.rows[0]?.t === null) return 0;
  const { rows } = await client.query<{ n: number }>('SELECT count(*) AS n FROM drizzle.__drizzle_migrations');
  return rows[0]!.n;
}

/** Applies pending migrations to the database at `url`, once however many daemons call it at the same time. */
export async function applyPgMigrations(url: string, migrationsFolder = defaultPgMigrationsFolder()): Promise<{ applied: number }> {
  const client = await connectPostgres(url);
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATIONS_LOCK_KEY.toString()]);
    try {
      const before = await appliedCount(client);
      // Loaded here, not at the top: a daemon on SQLite never needs drizzle's Postgres driver.
      const [{ drizzle }, { migrate }] = await Promise.all([import('drizzle-orm/node-postgres'), import('drizzle-orm/node-postgres/migrator')]);
      await migrate(drizzle(client), { migrationsFolder });
      return { applied: (await appliedCount(client)) - before };
    } finally {
      await client.query('SELECT pg_advisory_unlock($1)', [MIGRATIONS_LOCK_KEY.toString()]);
    }
  } finally {
    await client.end();
  }
}

/**
 * Applied migrations, and how many of `migrations/pg/` this database has not applied (as drizzle counts:
 * every migration whose journal time is later than the last one recorded). Read through any handle.
 */
export async function pgMigrationStatus(sql: Sql, migrationsFolder = defaultPgMigrationsFolder()): Promise<{ applied: number; pending: number }> {
  const files = readMigrationFiles({ migrationsFolder });
  const table = await sql.get<{ t: string | null }>("SELECT to_regclass('drizzle.__drizzle_migrations')::text AS t");
  if (!table?.t) return { applied: 0, pending: files.length };
  const row = await sql.get<{ n: number; last: number | null }>('SELECT count(*) AS n, max(created_at) AS last FROM drizzle.__drizzle_migrations');
  const last = row?.last ?? null;
  return { applied: row?.n ?? 0, pending: files.filter((m) => last === null || last < m.folderMillis).length };
}
