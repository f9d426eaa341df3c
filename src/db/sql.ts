/**
 * SQLite behind the `Sql` handle (core/sql.ts). better-sqlite3 answers synchronously: each method is an
 * `async` function returning the value it already has, so a statement costs one settled promise and no
 * I/O wait; the prepared-statement cache (statements.ts) is the connection's, shared by all handles.
 */
import type { RunResult, Sql, SqlParams } from '../core/sql.js';
import type { Db } from './connection.js';
import { prepared, rowOf, statementCache, type Prepared } from './statements.js';

/**
 * Settled promises shared by every statement whose answer is one of these: no row, or a run that changed
 * no row or one (most guarded statements). A settled promise is immutable, so sharing one is safe.
 */
const NO_ROW: Promise<undefined> = Promise.resolve(undefined);
const CHANGED: readonly Promise<RunResult>[] = [Promise.resolve(Object.freeze({ changes: 0 })), Promise.resolve(Object.freeze({ changes: 1 }))];

/** A better-sqlite3 connection as an `Sql` handle. */
export class SqliteSql implements Sql {
  readonly dialect = 'sqlite' as const;
  private readonly statements: Map<string, Prepared>;
  constructor(readonly db: Db) {
    this.statements = statementCache(db);
  }

  get connection(): object {
    return this.db;
  }

  // better-sqlite3 binds an array (positional `?`) or an object (`@name`) passed as one argument: no
  // spread, and a direct method call rather than stmt[op] (both showed in the engine's profile). Not
  // `async`: the statement has run by the time the promise is made, and a shared settled promise (no
  // row, 0 or 1 change) costs no allocation; a failure is still a rejection, as from an async method.
  get<T>(text: string, params?: SqlParams): Promise<T | undefined> {
    try {
      const p = prepared(this.db, text, this.statements);
      const values = (params === undefined ? p.stmt.get() : p.stmt.get(params)) as unknown[] | undefined;
      return values === undefined ? NO_ROW : Promise.resolve(rowOf(p, values) as T);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  all<T>(text: string, params?: SqlParams): Promise<T[]> {
    try {
      const p = prepared(this.db, text, this.statements);
      const rows = (params === undefined ? p.stmt.all() : p.stmt.all(params)) as unknown[][];
      return Promise.resolve(rows.map((values) => rowOf(p, values)) as T[]);
    } catch (err) {
      return Promise.reject(err);
    }
  }

  run(text: string, params?: SqlParams): Promise<RunResult> {
    try {
      const { stmt } = prepared(this.db, text, this.statements);
      const changes = (params === undefined ? stmt.run() : stmt.run(params)).changes;
      return CHANGED[changes] ?? Promise.resolve({ changes });
    } catch (err) {
      return Promise.reject(err);
    }
  }
}

/**
 * The writer's handle as one write closure sees it: usable until the closure has settled, refused after.
 * A statement a closure forgot to await would otherwise run later, inside another closure's savepoint
 * or outside any transaction; refused, it fails loudly instead.
 */
export class ClosureSql implements Sql {
  readonly dialect: Sql['dialect'];
  readonly connection: object;
  private open = true;
  constructor(private readonly inner: Sql) {
    this.dialect = inner.dialect;
    this.connection = inner.connection;
  }

  revoke(): void {
    this.open = false;
  }

  /** The closure has ended: its statements are refused. */
  protected get revoked(): boolean {
    return !this.open;
  }

  get<T>(text: string, params?: SqlParams): Promise<T | undefined> {
    return this.open ? this.inner.get<T>(text, params) : this.refused();
  }

  all<T>(text: string, params?: SqlParams): Promise<T[]> {
    return this.open ? this.inner.all<T>(text, params) : this.refused();
  }

  run(text: string, params?: SqlParams): Promise<RunResult> {
    return this.open ? this.inner.run(text, params) : this.refused();
  }

  private refused(): Promise<never> {
    return Promise.reject(new Error('a statement ran after its write closure ended (a missing await?)'));
  }
}

/**
 * The SQLite writer's deadline for its closures, which run one at a time: one timer for the writer
 * instead of a timer and a `Promise.race` per closure (those showed in the engine's CPU profile at three
 * closures per item). The timer is armed when a closure starts and none is armed; when it fires it fails
 * the running closure if that one has run for `ms`, else re-arms for the rest of its time.
 */
export class ClosureDeadline {
  private timer: NodeJS.Timeout | undefined;
  private running: { started: number; fail: (err: Error) => void } | undefined;
  constructor(private readonly ms: number) {}

  /** `pending`'s outcome, or a failure once it has run for `ms`. */
  settle<T>(pending: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const closure = { started: performance.now(), fail: reject };
      this.running = closure;
      const done = () => {
        if (this.running === closure) this.running = undefined;
      };
      pending.then(
        (value) => {
          done();
          resolve(value);
        },
        (err: unknown) => {
          done();
          reject(err);
        },
      );
      this.timer ??= setTimeout(() => this.check(), this.ms).unref();
    });
  }

  /** Clears the timer (the writer closes). */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  private check(): void {
    this.timer = undefined;
    const closure = this.running;
    if (!closure) return;
    const ran = performance.now() - closure.started;
    if (ran < this.ms) {
      this.timer = setTimeout(() => this.check(), this.ms - ran).unref();
      return;
    }
    this.running = undefined;
    closure.fail(lateClosure(this.ms));
  }
}

function lateClosure(ms: number): Error {
  return new Error(`a write closure did not settle within ${ms} ms (it may await only its statements)`);
}

/**
 * A write closure's result, or a failure once it has run for `ms`: a closure may await only its
 * statements, and while it runs it holds up the writes behind it (SQLite's batch) or a connection and
 * its row locks (Postgres).
 */
export function settleClosure<T>(pending: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(lateClosure(ms)), ms);
  });
  return Promise.race([pending, late]).finally(() => clearTimeout(timer));
}
