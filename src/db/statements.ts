/**
 * A per-connection cache of prepared statements: each query function names its SQL once and pays for
 * preparing it once, so the hot path is one `run`/`get` on an already-compiled statement.
 */
import type Database from 'better-sqlite3';
import type { RunResult, Sql, SqlParams } from '../core/sql.js';
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

/**
 * The statements every item runs, without an async frame of their own: the handle's promise, chained
 * (an async function per statement showed in the engine's CPU and allocation profiles).
 */
const ignore = (): void => undefined;

/** Runs a statement whose result the caller does not need. */
export function runStatement(sql: Sql, text: string, params?: SqlParams): Promise<void> {
  return sql.run(text, params).then(ignore);
}

/** Runs a guarded statement that must change exactly one row (StaleStateError naming `what` otherwise). */
export function runGuarded(sql: Sql, text: string, params: SqlParams, what: string): Promise<void> {
  return sql.run(text, params).then((result) => expectOneChange(result, what));
}

/** Whether a statement changed exactly one row. */
export function changedOne(sql: Sql, text: string, params: SqlParams): Promise<boolean> {
  return sql.run(text, params).then(isOneChange);
}

const isOneChange = (result: RunResult): boolean => result.changes === 1;

/** A settled promise of nothing, shared (a no-op step on one dialect, e.g. a lock SQLite does not need). */
export const DONE: Promise<void> = Promise.resolve();
