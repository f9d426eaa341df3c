/**
 * A per-connection cache of prepared statements: each query function names its SQL once and pays for
 * preparing it once, so the hot path is one `run`/`get` on an already-compiled statement.
 */
import type Database from 'better-sqlite3';
import type { RunResult } from '../core/sql.js';
import type { Db } from './connection.js';
import { StaleStateError } from '../core/errors.js';

const caches = new WeakMap<Db, Map<string, Database.Statement>>();

/** The connection's cache (a handle that runs many statements keeps it rather than look it up each time). */
export function statementCache(db: Db): Map<string, Database.Statement> {
  let cache = caches.get(db);
  if (!cache) {
    cache = new Map();
    caches.set(db, cache);
  }
  return cache;
}

export function prepared(db: Db, sql: string, cache = statementCache(db)): Database.Statement {
  let stmt = cache.get(sql);
  if (!stmt) {
    stmt = db.prepare(sql);
    cache.set(sql, stmt);
  }
  return stmt;
}

/** Asserts a guarded statement changed exactly one row. */
export function expectOneChange(result: RunResult, what: string): void {
  if (result.changes !== 1) throw new StaleStateError(what);
}
