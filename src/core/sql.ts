/**
 * The storage handle every query function takes: one statement at a time, async so that a network
 * database (Postgres) fits behind the same functions as SQLite. Statement texts use better-sqlite3's
 * parameters (`@name` with an object, `?` with an array); where the SQL itself differs between
 * dialects, the query function picks its text by `dialect`.
 *
 * Two handles exist in a daemon: the writer's, given to a write closure for the closure's lifetime only
 * (db/writer.ts), and the reader's, for every read that is not part of a write. Code outside a write
 * never holds the writer's handle, so it cannot see rows a batch has not committed — or will roll back.
 */
/** A value a positional parameter binds (an object in an array would not bind: pass it as the params). */
type SqlValue = string | number | bigint | Uint8Array | null;

export type SqlParams = Readonly<Record<string, unknown>> | readonly SqlValue[];

export interface RunResult {
  /** Rows the statement changed: what every guarded state change checks. */
  readonly changes: number;
}

export interface Sql {
  readonly dialect: 'sqlite' | 'postgres';
  /**
   * Identifies the connection (or pool) behind the handle, for per-connection caches: every handle the
   * writer gives its closures shares the writer's.
   */
  readonly connection: object;
  /** The first row, or undefined. */
  get<T>(text: string, params?: SqlParams): Promise<T | undefined>;
  all<T>(text: string, params?: SqlParams): Promise<T[]>;
  run(text: string, params?: SqlParams): Promise<RunResult>;
  /**
   * Only on the Postgres writer's closure handle (db/pg/writer.ts): queues a statement to run in the one
   * query that COMMITs the closure's transaction, after everything the closure ran and before the COMMIT,
   * with no round trip to this process in between. `committed` gets its rows once that COMMIT succeeded,
   * before the write's events are published; a failing statement rolls the whole transaction back.
   * Undefined on every other handle: the caller then runs the statement itself.
   */
  readonly atCommit?: (text: string, params: SqlParams, committed: (rows: unknown[]) => void) => void;
}
