/**
 * The migrations runner: applies drizzle-kit's SQL migrations (plus our hand-written ones) at daemon
 * start. drizzle runs every pending migration in one transaction, so a failing one leaves the schema
 * as it was.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { drizzle } from 'drizzle-orm/better-sqlite3';
import { migrate } from 'drizzle-orm/better-sqlite3/migrator';
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

function appliedCount(db: Db): number {
  const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__drizzle_migrations'").get();
  if (!table) return 0;
  return (db.prepare('SELECT count(*) AS n FROM __drizzle_migrations').get() as { n: number }).n;
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
