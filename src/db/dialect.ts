/**
 * The few SQL fragments SQLite and Postgres spell differently, for the statements that need them. A
 * statement is written once; where it must differ, it takes its fragment from here by `sql.dialect`
 * (two texts per statement at most, each compiled and cached once). Everything else we write is
 * portable: `ON CONFLICT`, `RETURNING`, `IS [NOT] DISTINCT FROM`, `count(*) FILTER (WHERE …)`, row
 * values; SQLite's `INDEXED BY` hints are dropped by the Postgres handle itself (pg/sql.ts).
 */
import type { Sql } from '../core/sql.js';
import type { ThreadStatus, WorkItemStatus } from '../domain/states.js';

type Dialect = Sql['dialect'];

/**
 * A tie-breaker that follows insertion order, for lists ordered by a creation time. SQLite: the rowid
 * (walked for free at the end of every index). Postgres has no rowid; our ids are UUIDv7, strictly
 * increasing per daemon, so within one millisecond they order one daemon's rows as they were made.
 */
export function insertionOrder(dialect: Dialect, alias = ''): string {
  return `${alias}${dialect === 'postgres' ? 'id' : 'rowid'}`;
}

/**
 * The value at `path` (`a.b`) of the JSON text in `column`, as text: SQLite's `json_extract` (which
 * gives strings as text), Postgres's `#>>` on the column read as jsonb.
 *
 * On Postgres the JSON escape of U+0000 is neutralised first: a JSON-text column may hold it (a
 * provider's body as received, an imported thread's `input`/`target_ref`: domain/storable-text.ts), and `jsonb`
 * refuses it (22P05, "unsupported Unicode escape sequence") — a statement reading one such row would fail
 * every time it ran (a scheduled run's closing usage sum, at its thread's end). Each escaped backslash
 * `\\` is first written `\u005c` (the same character), so every backslash left starts an escape of its
 * own; then `\u0000` can only be a NUL's, and is written `\ufffd` (U+FFFD, the replacement character).
 * Both keep the JSON valid, and every other value reads as it did (a literal `\\u0000` too).
 * The escape of half a surrogate pair (`\ud83d` not followed by a low one's escape, or a low one not
 * preceded by a high one's: what `JSON.stringify` writes for a lone surrogate in a provider's body) is
 * refused the same way (22P02, "Unicode low surrogate must follow a high surrogate"), so it is written
 * `\ufffd` too; a whole pair's two escapes read as their character. SQLite's JSON functions read both.
 */
export function jsonText(dialect: Dialect, column: string, path: string): string {
  if (dialect === 'sqlite') return `json_extract(${column}, '$.${path}')`;
  const nulFree = `replace(replace(${column}, '\\\\', '\\u005c'), '\\u0000', '\\ufffd')`;
  const highAlone = `regexp_replace(${nulFree}, '\\\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\\\u[dD][c-fC-F][0-9a-fA-F]{2})', '\\\\ufffd', 'g')`;
  const wellFormed = `regexp_replace(${highAlone}, '(?<!\\\\u[dD][89abAB][0-9a-fA-F]{2})\\\\u[dD][c-fC-F][0-9a-fA-F]{2}', '\\\\ufffd', 'g')`;
  return `(${wellFormed}::jsonb #>> '{${path.split('.').join(',')}}')`;
}

/** The number at `path` of the JSON text in `column` (null when absent), for sums. */
export function jsonNumber(dialect: Dialect, column: string, path: string): string {
  return dialect === 'postgres' ? `${jsonText(dialect, column, path)}::numeric` : jsonText(dialect, column, path);
}

/**
 * `column` is one of the strings of a JSON array bound as text (`param`: `?` or `@name`) — a few kinds,
 * or a set of ids of any length (a bulk cancel's 10,000). On Postgres a constant array the planner can count (pg migration 0006), so the ids
 * are looked up by index however stale the table's statistics are. A prepared statement run over and over with a
 * few ids is planned again at every call this way: `inJsonArrayInitPlanPg` is for those.
 */
export function inJsonArray(dialect: Dialect, column: string, param: string): string {
  return dialect === 'postgres' ? `${column} = ANY(combine_text_array(CAST(${param} AS jsonb)))` : `${column} IN (SELECT value FROM json_each(${param}))`;
}

/**
 * Postgres: `column` is one of the strings of a JSON array bound as text, the array an InitPlan's (an
 * `ARRAY(SELECT …)`, which the planner never evaluates), for a statement run over and over with a few ids
 * (a start's threads and items). `inJsonArray`'s constant array makes a prepared statement's custom plan
 * cost less than its generic one (a parameter's array is estimated at 10 elements, the start's lists hold
 * ~1–5), so the connection planned it again at every execution. With the InitPlan every plan estimates the
 * array at 10, so the custom plans cost what the generic one does and the connection keeps the generic one
 * after its first five. On a key column, ten ids are looked up by its index on any table of more than a few
 * pages. The plan evaluates an InitPlan only where it first needs its value: a filter ANDed before it can
 * skip it (see threads.ts START_THREADS_PG). A statement's status tests go through `statusTestNoPartialIndex`.
 */
export function inJsonArrayInitPlanPg(column: string, param: string): string {
  return `${column} = ANY(ARRAY(SELECT jsonb_array_elements_text(CAST(${param} AS jsonb))))`;
}

/**
 * `status = '<status>'`, which on Postgres no partial index's predicate matches: written
 * `(status = '<status>') IS TRUE`, the same test (status is NOT NULL), so a row the statement names by
 * its key is looked up by the key. As `status = '<status>'` a generic plan could take a partial index of
 * the rows in that status (`WHERE status = …`) instead, whenever the statistics it was planned with said
 * no or few rows had it (gathered while nothing was active, leased or queued), and it keeps that plan until
 * the next ANALYZE: a walk of every such row's entry, and of its dead versions' not yet vacuumed, at every
 * call (the claim's read: ~900 entries of idx_work_items_fair per claim in `bench/diag-pg.ts scale 1`;
 * markWorkItemsRunning: ~1,260 of idx_work_items_leased; the start: idx_threads_active whole). SQLite
 * (which reads such a row by its key as written): the plain test.
 */
export function statusTestNoPartialIndex(dialect: Dialect, status: ThreadStatus | WorkItemStatus): string {
  return dialect === 'postgres' ? `(status = '${status}') IS TRUE` : `status = '${status}'`;
}

/**
 * Appended to a SELECT that a write then changes: on Postgres the rows are locked for this transaction
 * and rows another transaction has locked are passed over (another daemon is claiming or rescuing them:
 * not waited for, and never taken twice). `NO KEY UPDATE`, not `UPDATE`: it does not conflict with the
 * KEY SHARE locks foreign-key checks take when another daemon inserts a row that references the item.
 * Nothing on SQLite, whose one writer runs every write alone.
 */
export function skipLockedRows(dialect: Dialect): string {
  return dialect === 'postgres' ? ' FOR NO KEY UPDATE SKIP LOCKED' : '';
}

/** `skipLockedRows` for rows that will be deleted (`FOR UPDATE`: a delete needs the strongest row lock). */
export function skipLockedLockRows(dialect: Dialect): string {
  return dialect === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '';
}
