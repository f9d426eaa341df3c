/**
 * The migrations runner: applies drizzle-kit's SQL migrations (plus our hand-written ones) at daemon
 * start. drizzle runs every pending migration in one transaction, so a failing one leaves the schema
 * as it was. Before migrating an existing database, the daemon takes an online backup of it.
 */
import { existsSync, mkdirSync, readdirSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import type { Db } from './connection.js';

/** Finds `migrations/` from wherever this module was loaded (source under vitest, or dist/). */
export function defaultMigrationsFolder(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'migrations');
    if (existsSync(join(candidate, 'meta', '_journal.json'))) return candidate;
    dir = dirname(dir);
  }
  throw new Error('cannot find the migrations folder (migrations/meta/_journal.json)');
}

function hasMigrationsTable(db: Db): boolean {
  return db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'").get() !== undefined;
}

function appliedCount(db: Db): number {
  if (!hasMigrationsTable(db)) return 0;
  return (db.prepare('SELECT count(*) AS n FROM __drizzle_migrations').get() as { n: number }).n;
}

/**
 * How many migrations in `folder` this database has not applied. drizzle applies every migration whose
 * journal time is later than the last one recorded, so that is what counts as pending here too.
 */
export function migrationStatus(db: Db, migrationsFolder = defaultMigrationsFolder()): { applied: number; pending: number } {
  const files = readMigrationFiles({ migrationsFolder });
  const last = hasMigrationsTable(db) ? (db.prepare('SELECT max(created_at) AS t FROM __drizzle_migrations').get() as { t: number | null }).t : null;
  return { applied: appliedCount(db), pending: files.filter((m) => last === null || Number(last) < m.folderMillis).length };
}

/**
 * Applies pending migrations. Foreign keys are off while they run because table rebuilds would
 * otherwise fail; the result is checked with `foreign_key_check` before they are turned back on.
 */
export function applyMigrations(db: Db, migrationsFolder = defaultMigrationsFolder()): { applied: number } {
  const before = appliedCount(db);
  db.pragma('foreign_keys = OFF');
  try {
    migrate(drizzle(db), { migrationsFolder });
    const violations = db.pragma('foreign_key_check') as unknown[];
    if (violations.length > 0) throw new Error(`migration left ${violations.length} foreign key violation(s)`);
  } finally {
    db.pragma('foreign_keys = ON');
  }
  return { applied: appliedCount(db) - before };
}

/** Backups kept in COMBINE_HOME/backups/ (oldest removed first). */
export const BACKUPS_KEPT = 3;

/**
 * Copies the live database (online: SQLite's backup API, consistent even with a WAL) to
 * `dir/combine-<time>-m<applied>.db`, then removes all but the newest BACKUPS_KEPT backups.
 */
export async function backupDatabase(db: Db, dir: string, now: number, applied: number): Promise<string> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stamp = new Date(now).toISOString().replace(/[:.]/g, '-');
  const path = join(dir, `combine-${stamp}-m${applied}.db`);
  await db.backup(path);
  const backups = readdirSync(dir)
    .filter((f) => /^combine-.*\.db$/.test(f))
    .sort();
  for (const old of backups.slice(0, Math.max(0, backups.length - BACKUPS_KEPT))) unlinkSync(join(dir, old));
  return path;
}
