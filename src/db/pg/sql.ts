/**
 * Postgres behind the `Sql` handle (core/sql.ts), over node-postgres. Query functions are written once
 * in better-sqlite3's parameter syntax (`@name` with an object, `?` with an array); each text is
 * rewritten to Postgres's `$n` once, cached per text, and runs as a named prepared statement, so a
 * connection parses and plans it once (each pooled connection prepares it on first use).
 *
 * Rows look as they do from SQLite: the connection's type parsers (connection.ts) read int8 and numeric
 * as numbers; the schema (pg/schema.ts) stores JSON as text and has no booleans or timestamps.
 */
import type pg from 'pg';
import type { RunResult, Sql, SqlParams } from '../../core/sql.js';
import { isStalePreparedStatement } from '../errors.js';
import { pgDriver } from './driver.js';
import { type Queryable, submitStatement } from './statement-query.js';

/** A text compiled for Postgres: `$n` placeholders, and where each value comes from. */
export interface CompiledStatement {
  /** The prepared-statement name, or undefined once the cache is full (then it runs unnamed). */
  readonly name: string | undefined;
  readonly text: string;
  /** For `@name` texts: the parameter of each `$n`, in order; null for positional `?` texts. */
  readonly names: readonly string[] | null;
  /** Number of `$n` placeholders. */
  readonly count: number;
}

// Texts are few and fixed (one per query function, plus a bounded set of filter combinations), so the
// cache stays small; the bound only keeps a mistake (a text built with values in it) from growing it.
const MAX_NAMED = 2000;
const compiled = new Map<string, CompiledStatement>();

const IDENT_START = /[A-Za-z_]/;
const IDENT_PART = /[A-Za-z0-9_]/;

/** SQLite's index hint (`FROM t INDEXED BY idx`): a plan choice, not a meaning; Postgres plans for itself. */
const INDEX_HINT = /^INDEXED\s+BY\s+[A-Za-z_][A-Za-z0-9_]*/i;

/**
 * Rewrites `@name` and `?` placeholders to `$n` and drops SQLite's `INDEXED BY` hints, leaving string
 * literals, quoted identifiers and comments alone. A repeated `@name` reuses its `$n`. A text mixing
 * both placeholder styles is refused (the handle binds one params argument: an object or an array).
 */
export function compileStatement(text: string): CompiledStatement {
  const hit = compiled.get(text);
  if (hit) return hit;
  let out = '';
  const names: string[] = [];
  let positional = 0;
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === "'" || c === '"') {
      const end = closingQuote(text, i, c);
      out += text.slice(i, end);
      i = end;
    } else if (c === '-' && text[i + 1] === '-') {
      const nl = text.indexOf('\n', i);
      const end = nl < 0 ? text.length : nl;
      out += text.slice(i, end);
      i = end;
    } else if (c === '/' && text[i + 1] === '*') {
      const close = text.indexOf('*/', i + 2);
      const end = close < 0 ? text.length : close + 2;
      out += text.slice(i, end);
      i = end;
    } else if (c === '@' && IDENT_START.test(text[i + 1] ?? '')) {
      let j = i + 2;
      while (j < text.length && IDENT_PART.test(text[j]!)) j++;
      const name = text.slice(i + 1, j);
      let n = names.indexOf(name);
      if (n < 0) n = names.push(name) - 1;
      out += `$${n + 1}`;
      i = j;
    } else if ((c === 'I' || c === 'i') && !IDENT_PART.test(text[i - 1] ?? ' ') && INDEX_HINT.test(text.slice(i, i + 80))) {
      i += INDEX_HINT.exec(text.slice(i, i + 80))![0].length;
    } else if (c === '?') {
      positional++;
      out += `$${positional}`;
      i++;
    } else {
      out += c;
      i++;
    }
  }
  if (positional > 0 && names.length > 0) throw new Error(`a statement mixes @name and ? parameters: ${text}`);
  const statement: CompiledStatement = {
    name: compiled.size < MAX_NAMED ? `combine_${compiled.size}` : undefined,
    text: out,
    names: names.length > 0 ? names : null,
    count: names.length > 0 ? names.length : positional,
  };
  compiled.set(text, statement);
  return statement;
}

/** Index just past the quote that closes the one at `start` (a doubled quote is an escaped one). */
function closingQuote(text: string, start: number, quote: string): number {
  let i = start + 1;
  for (;;) {
    const q = text.indexOf(quote, i);
    if (q < 0) return text.length;
    if (text[q + 1] !== quote) return q + 1;
    i = q + 2;
  }
}

/** The values for `$1…$n`, refusing what better-sqlite3 would refuse (a missing or undefined parameter, a wrong count). */
export function bindValues(s: CompiledStatement, text: string, params: SqlParams | undefined): unknown[] {
  if (s.names === null) {
    const values = (params ?? []) as readonly unknown[];
    if (!Array.isArray(values) || values.length !== s.count) {
      throw new RangeError(`statement expects ${s.count} positional parameter(s), got ${Array.isArray(values) ? values.length : 'an object'}: ${text}`);
    }
    return values as unknown[];
  }
  if (params === undefined || Array.isArray(params)) throw new RangeError(`statement expects named parameters: ${text}`);
  const named = params as Readonly<Record<string, unknown>>;
  // A loop: docs/design-notes.md "Closures made per call".
  const values: unknown[] = [];
  for (const name of s.names) {
    const value = named[name];
    if (value === undefined) throw new RangeError(`missing named parameter "${name}": ${text}`);
    values.push(value);
  }
  return values;
}

/**
 * Rethrows a statement's error with the stack of the code that awaited it: an error the driver raises on a
 * checked-out connection carries only the protocol parser's frames (statement-query.ts submits without the
 * driver's promise, which re-captured it), and the daemon's `unexpected error:` output should name our caller.
 */
export function withCallerStack(err: unknown): never {
  if (err instanceof Error) Error.captureStackTrace(err, withCallerStack);
  throw err;
}

/** What `get` answers from a statement's result: its first row (module functions, not closures per call). */
function firstRow(result: pg.QueryResult): unknown {
  return result.rows[0];
}

/** What `all` answers: every row. */
function allRows(result: pg.QueryResult): unknown[] {
  return result.rows;
}

/** What `run` answers: the rows the statement changed. */
function changesOf(result: pg.QueryResult): RunResult {
  return { changes: result.rowCount ?? 0 };
}

/** A pool or a client as an `Sql` handle. */
export class PgSql implements Sql {
  readonly dialect = 'postgres' as const;
  /**
   * The first statement refused for a stale plan and not run again here (on one connection: a transaction's),
   * even if its caller caught it: the transaction is aborted all the same, so what fails after it (25P02, or
   * the closure's own decision) is its consequence, and the writer judges the failure by this (pg/writer.ts:
   * it closes the connection and runs the write again).
   */
  stalePlan: Error | undefined;

  constructor(readonly target: Queryable) {}

  get connection(): object {
    return this.target;
  }

  get<T>(text: string, params?: SqlParams): Promise<T | undefined> {
    return this.answer(text, params, firstRow) as Promise<T | undefined>;
  }

  all<T>(text: string, params?: SqlParams): Promise<T[]> {
    return this.answer(text, params, allRows) as Promise<T[]>;
  }

  run(text: string, params?: SqlParams): Promise<RunResult> {
    return this.answer(text, params, changesOf);
  }

  /**
   * The statement's result as `pick` takes it. A failure is caught in a try around the await rather than
   * with `.catch(…)`: a promise and a closure fewer per statement. `query` is called outside the try, so
   * what it throws at once (a missing parameter) rejects as it is, not taken for a failed statement.
   */
  private async answer<R>(text: string, params: SqlParams | undefined, pick: (result: pg.QueryResult) => R): Promise<R> {
    const pending = this.query(text, params);
    let result: pg.QueryResult;
    try {
      result = await pending;
    } catch (err) {
      result = await this.rerunAfterStalePlan(err, text, params, 1);
    }
    return pick(result);
  }

  /**
   * After a statement failed: on a pool, one whose prepared plan went stale (the schema changed under it:
   * db/errors.ts `isStalePreparedStatement`) runs again — it ran nothing, and the pool closed the connection
   * it failed on (a pool closes a connection whose query failed), so the run prepares it anew, with the new
   * columns, unless it lands on another connection that prepared it before the change. Each such run
   * closes one: a pool of `max` connections has no more than `max` of them. Any other error, or on one
   * connection (which keeps its stale plan: its owner opens another), it is rethrown.
   */
  private rerunAfterStalePlan(err: unknown, text: string, params: SqlParams | undefined, attempt: number): Promise<pg.QueryResult> {
    const target = this.target;
    const stale = isStalePreparedStatement(err);
    if (!stale || !(target instanceof pgDriver().Pool) || attempt > (target.options.max ?? 10)) {
      if (stale) this.stalePlan ??= err as Error;
      withCallerStack(err);
    }
    return this.query(text, params).catch((next) => this.rerunAfterStalePlan(next, text, params, attempt + 1));
  }

  protected query(text: string, params: SqlParams | undefined): Promise<pg.QueryResult> {
    const s = compileStatement(text);
    const values = bindValues(s, text, params);
    return submitStatement(this.target, s.name, s.text, values);
  }
}
