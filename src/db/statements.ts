/**
 * A per-connection cache of prepared statements: each query function names its SQL once and pays for
 * preparing it once, so the hot path is one `run`/`get` on an already-compiled statement.
 */
import type Database from 'better-sqlite3';
import type { RunResult, Sql, SqlParams } from '../core/sql.js';
import type { Db } from './connection.js';
import { StaleStateError } from '../core/errors.js';

/**
 * A prepared statement. One that returns rows is in raw mode (its rows come as arrays) and `row` makes
 * each array the object better-sqlite3 would have made — column name to value, a later column of the
 * same name winning — with one object literal per statement: better-sqlite3 sets a row object's
 * properties one by one through the engine's API, which cost about half of a primary-key read of a
 * 37-column row (10.7 µs against 5.2 µs measured; four such reads per engine item).
 */
export interface Prepared {
  stmt: Database.Statement;
  /** The row object of a raw row (identity for a statement that returns no rows: `get` refuses it). */
  row: (values: unknown[]) => unknown;
  /** Columns `row` was made for: a schema change re-expands a `*` (SQLite re-prepares the text), and `row` is made again. */
  width: number;
}

const caches = new WeakMap<Db, Map<string, Prepared>>();

/** The connection's cache (a handle that runs many statements keeps it rather than look it up each time). */
export function statementCache(db: Db): Map<string, Prepared> {
  let cache = caches.get(db);
  if (!cache) {
    cache = new Map();
    caches.set(db, cache);
  }
  return cache;
}

export function prepared(db: Db, sql: string, cache = statementCache(db)): Prepared {
  let entry = cache.get(sql);
  if (!entry) {
    const stmt = db.prepare(sql);
    entry = { stmt, row: asIs, width: 0 };
    if (stmt.reader) {
      stmt.raw(true);
      makeRow(entry);
    }
    cache.set(sql, entry);
  }
  return entry;
}

/** The row object of `values` (a raw row of `p`), remaking `p.row` when the statement's columns changed. */
export function rowOf(p: Prepared, values: unknown[]): unknown {
  if (values.length !== p.width) makeRow(p);
  return p.row(values);
}

const asIs = (values: unknown[]): unknown => values;

/**
 * Makes `p.row` for the statement's current columns: `(v) => ({"id": v[0], "name": v[1], …})`, generated
 * once per statement so every row of it shares one object shape. The names are the database's column
 * names, written as JSON string literals. A column named `__proto__` would set the prototype in a
 * literal: such a statement's rows get their properties defined one by one instead.
 */
function makeRow(p: Prepared): void {
  const names = p.stmt.columns().map((c) => c.name);
  p.width = names.length;
  if (names.includes('__proto__')) {
    p.row = (values) => {
      const row = {};
      for (const [i, name] of names.entries()) Object.defineProperty(row, name, { value: values[i], enumerable: true, writable: true, configurable: true });
      return row;
    };
    return;
  }
  p.row = objectLiteralOf(names.map((name, i) => [name, i]));
}

/**
 * `(v) => ({ "name": v[key], … })`, generated once: every object it makes has one shape, set in one
 * literal (a property added at a time, per row, showed in the engine's profile). `key`: an index into
 * an array, or a property name. The names are written as JSON string literals; none may be `__proto__`
 * (a literal would set the prototype).
 */
export function objectLiteralOf<V>(fields: readonly (readonly [name: string, key: number | string])[]): (v: V) => Record<string, unknown> {
  const body = fields.map(([name, key]) => `${JSON.stringify(name)}: v[${JSON.stringify(key)}]`).join(', ');
  return new Function('v', `return { ${body} };`) as (v: V) => Record<string, unknown>;
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

/**
 * `runGuarded` as one of the transaction's last statements (`runAtCommit`): on a handle that runs
 * statements in its COMMIT's query, no client code runs between it and the COMMIT, so the database checks
 * the count — a count other than one raises (migrations/pg/0012), the whole transaction rolls back, and
 * the writer gives the caller a StaleStateError naming `what` (db/errors.ts). `text` is one UPDATE or
 * DELETE without RETURNING, with named parameters. Elsewhere it runs now, as `runGuarded`.
 */
export function runGuardedAtCommit(sql: Sql, text: string, params: Readonly<Record<string, unknown>>, what: string): Promise<void> {
  if (!sql.atCommit) return runGuarded(sql, text, params, what);
  sql.atCommit(guardedAtCommitText(text), { ...params, guard_what: what }, ignore);
  return DONE;
}

/**
 * `runGuardedAtCommit` of a set-based statement that must change exactly `expected` rows (one per id it
 * is given): the database checks the count at COMMIT the same way. Elsewhere it runs now and checks it.
 */
export function runGuardedAllAtCommit(sql: Sql, text: string, params: Readonly<Record<string, unknown>>, expected: number, what: string): Promise<void> {
  if (!sql.atCommit) return sql.run(text, params).then((result) => expectChanges(result, expected, what));
  sql.atCommit(guardedAtCommitText(text, true), { ...params, guard_expected: expected, guard_what: what }, ignore);
  return DONE;
}

function expectChanges(result: RunResult, expected: number, what: string): void {
  if (result.changes !== expected) throw new StaleStateError(what);
}

/** A statement written alongside a guarded one (`runGuardedAtCommitAlong`). */
export interface AlongStatement {
  /** An INSERT, UPDATE or DELETE without RETURNING, of the guarded statement's named parameters and its own. */
  text: string;
  /** Its own parameters, beside the guarded statement's (a name in both throws: one would take the other's value). */
  params?: Readonly<Record<string, unknown>>;
  /** Checked too when given: one row changed, or it raises naming this (only on a handle with a COMMIT's query). */
  what?: string;
}

/**
 * `runGuardedAtCommit` with another statement that writes alongside it (`along`): on a handle that runs
 * statements in its COMMIT's query both are one statement there — `along` a data-modifying CTE beside the
 * guarded one, which Postgres runs exactly once, to completion, though nothing reads it — and the database
 * checks the guarded one's count the same way, and `along.what`'s too when given. Both see the database as
 * it was before the statement (one snapshot): `along` must not read what `text` writes, nor `text` what
 * `along` writes; nor may the two rely on which of them runs first (Postgres leaves that order unspecified).
 * Elsewhere `along` runs now, then the guarded statement; a checked `along` is refused there (its callers
 * join only on a handle with a COMMIT's query: db/projects.ts `runDocumentUpdate`).
 */
export function runGuardedAtCommitAlong(sql: Sql, text: string, params: Readonly<Record<string, unknown>>, what: string, along: AlongStatement): Promise<void> {
  const all = along.params ? withAlongParams(params, along.params) : params;
  if (!sql.atCommit) {
    if (along.what !== undefined) throw new Error(`a checked statement alongside "${what}" needs a handle that runs statements in its COMMIT's query`);
    return sql.run(along.text, all).then(() => runGuarded(sql, text, all, what));
  }
  const guards = along.what === undefined ? { guard_what: what } : { guard_what: what, guard_along_what: along.what };
  sql.atCommit(guardedAtCommitText(text, false, along.text, along.what !== undefined), { ...all, ...guards }, ignore);
  return DONE;
}

/** A guarded statement's parameters with those of the statement alongside it; a name in both throws. */
function withAlongParams(params: Readonly<Record<string, unknown>>, along: Readonly<Record<string, unknown>>): Record<string, unknown> {
  for (const key of Object.keys(along)) if (key in params) throw new Error(`a guarded statement and the one alongside it both name parameter @${key}`);
  return { ...params, ...along };
}

const guardedTexts = new Map<string, string>();

/**
 * The statement that checks its own count (one text per statement: each is prepared once per connection):
 * one row changed, or with `all`, as many as `@guard_expected` (combine_expect_one_change is given 1 then);
 * `along`, if given, written by a CTE of its own in the same statement, its count checked too with
 * `alongGuarded` (one row, or it raises naming `@guard_along_what`; the guarded statement's is checked first).
 */
function guardedAtCommitText(text: string, all = false, along?: string, alongGuarded = false): string {
  const key = `${all ? 'all' : 'one'}\0${alongGuarded ? 'guarded' : ''}\0${along ?? ''}\0${text}`;
  let guarded = guardedTexts.get(key);
  if (guarded === undefined) {
    const changed = '(SELECT count(*) FROM changed)';
    const count = all ? `CASE WHEN ${changed} = CAST(@guard_expected AS bigint) THEN 1 ELSE 0 END` : changed;
    const alongside = along === undefined ? '' : alongGuarded ? `, written_along AS (${along} RETURNING 1)` : `, written_along AS (${along})`;
    const alongCheck = alongGuarded ? ', combine_expect_one_change((SELECT count(*) FROM written_along), @guard_along_what)' : '';
    guarded = `WITH changed AS (${text} RETURNING 1)${alongside} SELECT combine_expect_one_change(${count}, @guard_what)${alongCheck}`;
    guardedTexts.set(key, guarded);
  }
  return guarded;
}

/**
 * Runs a statement whose rows the caller does not need as one of the transaction's last: on a handle that
 * runs statements in its COMMIT's query (the Postgres writer's `Sql.atCommit`) it is queued there, so the
 * rows it locks stay locked only inside that query and it costs no round trip of its own; elsewhere it runs now.
 */
export function runAtCommit(sql: Sql, text: string, params: SqlParams): Promise<void> {
  if (!sql.atCommit) return runStatement(sql, text, params);
  sql.atCommit(text, params, ignore);
  return DONE;
}
