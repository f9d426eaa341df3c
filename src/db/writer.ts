/**
 * The single writer. Every write in the daemon goes through `write()`, which implements group commit:
 * the writes that arrive in the same turn of the event loop share one transaction, hence one fsync,
 * and each caller's promise settles only after that COMMIT (durable under synchronous=FULL).
 *
 * Isolation between callers: each write runs inside its own SAVEPOINT, so a write that throws is rolled
 * back alone and only its caller sees the error. Events a write emits are published after the commit
 * that made them true, never for a write that was rolled back.
 *
 * Async closures: a closure may return a promise (it awaits the `Sql` handle it is given). The closures
 * of a batch still run strictly one after another, each inside its savepoint, so they nest as before. A
 * closure may await only its statements — never a provider call or a timer: the batch, and every write
 * queued behind it, waits for it; one that has not settled after `closureTimeoutMs` fails (rolled back
 * alone). While a closure awaits, other code runs: it must not read this connection, which holds the
 * batch's uncommitted rows. Reads outside writes go to a reader connection (WAL: the last commit).
 * A closure that returns a plain value runs exactly as before, with no await between statements.
 *
 * Failure behaviour: if BEGIN, COMMIT or a statement fails with an infrastructure error (busy beyond
 * busy_timeout, disk full, I/O error), the whole batch is rolled back and retried a bounded number of
 * times; after that every caller in the batch gets an InfraError and `onInfraFailure` is called (health
 * turns unready). Nothing is ever half-applied: a batch commits entirely or not at all.
 */
import type Database from 'better-sqlite3';
import { InfraError } from '../core/errors.js';
import type { TxRunner, WriteFn } from '../core/tx.js';
import type { Db } from './connection.js';
import { isInfraSqliteError } from './errors.js';
import { ClosureDeadline, ClosureSql, SqliteSql } from './sql.js';

interface Job<E> {
  fn: WriteFn<unknown, E>;
  /** Runs alone, outside any transaction, on the raw connection (maintenance: WAL checkpoint, vacuum). */
  outside?: (db: Db) => unknown;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export interface WriterOptions<E> {
  /** Receives the events of each committed batch, in order. */
  publish?: (events: E[]) => void;
  /** Upper bound on writes per transaction. */
  maxBatch?: number;
  /** Attempts for a batch that hits an infrastructure error. */
  infraAttempts?: number;
  infraRetryDelayMs?: number;
  onCommit?: (info: { writes: number; commitMs: number }) => void;
  onInfraFailure?: (err: unknown) => void;
  onInfraRecovered?: () => void;
  /**
   * Called after any rollback (one write's savepoint or a whole batch) with the connection it happened
   * on (`Sql.connection`): caches of stored state read on that connection must forget.
   */
  onRollback?: (connection: object) => void;
  /** An async closure still pending after this long fails (default 5 s): it holds up every write. */
  closureTimeoutMs?: number;
}

/** The transaction-control statements, compiled once: a batch of N writes runs 2N + 2 of them. */
interface TxStatements {
  begin: Database.Statement;
  commit: Database.Statement;
  rollback: Database.Statement;
  savepoint: Database.Statement;
  release: Database.Statement;
  rollbackTo: Database.Statement;
}

export class Writer<E = never> implements TxRunner<E> {
  private queue: Job<E>[] = [];
  private flushing = false;
  private scheduled = false;
  private infraFailed = false;
  private closed = false;
  private readonly sql: TxStatements;
  private readonly handle: SqliteSql;
  private readonly deadline: ClosureDeadline;

  constructor(
    readonly db: Db,
    private readonly opts: WriterOptions<E> = {},
  ) {
    this.sql = {
      begin: db.prepare('BEGIN IMMEDIATE'),
      commit: db.prepare('COMMIT'),
      rollback: db.prepare('ROLLBACK'),
      savepoint: db.prepare('SAVEPOINT write'),
      release: db.prepare('RELEASE write'),
      rollbackTo: db.prepare('ROLLBACK TO write'),
    };
    this.handle = new SqliteSql(db);
    this.deadline = new ClosureDeadline(opts.closureTimeoutMs ?? 5000);
  }

  /** Runs `fn` in a transaction shared with concurrent writes; resolves with its result once committed. */
  write<T>(fn: WriteFn<T, E>): Promise<T> {
    if (this.closed) return Promise.reject(new Error('writer is closed'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });
  }

  /**
   * Runs `fn` on the connection outside any transaction, after the writes queued before it and before
   * those queued after it. For statements SQLite refuses inside a transaction (wal_checkpoint, VACUUM).
   */
  outsideTransaction<T>(fn: (db: Db) => T): Promise<T> {
    if (this.closed) return Promise.reject(new Error('writer is closed'));
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ fn: () => undefined, outside: fn, resolve: resolve as (v: unknown) => void, reject });
      this.schedule();
    });
  }

  /** Writes still waiting for a transaction. */
  get pending(): number {
    return this.queue.length;
  }

  /** Refuses new writes; writes already queued are still committed. */
  async close(): Promise<void> {
    this.closed = true;
    while (this.queue.length > 0 || this.flushing) await new Promise((r) => setImmediate(r));
    this.deadline.stop();
  }

  private schedule(): void {
    if (this.scheduled || this.flushing) return;
    this.scheduled = true;
    // setImmediate, not a microtask: requests already read from sockets in this turn join the batch.
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length > 0) {
        const outside = this.queue[0]!.outside;
        if (outside) {
          const job = this.queue.shift()!;
          try {
            job.resolve(outside(this.db));
          } catch (err) {
            job.reject(err);
          }
          continue;
        }
        const nextOutside = this.queue.findIndex((j) => j.outside);
        const end = Math.min(nextOutside < 0 ? this.queue.length : nextOutside, this.opts.maxBatch ?? 1024);
        await this.commitBatch(this.queue.splice(0, end));
      }
    } finally {
      this.flushing = false;
    }
  }

  private async commitBatch(batch: Job<E>[]): Promise<void> {
    const attempts = this.opts.infraAttempts ?? 4;
    let lastErr: unknown;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        const { outcomes, events, commitMs } = await this.runBatch(batch);
        if (this.infraFailed) {
          this.infraFailed = false;
          this.opts.onInfraRecovered?.();
        }
        this.opts.onCommit?.({ writes: batch.length, commitMs });
        if (events.length > 0) this.opts.publish?.(events);
        outcomes.forEach((o, i) => {
          if (o.ok) batch[i]!.resolve(o.value);
          else batch[i]!.reject(o.error);
        });
        return;
      } catch (err) {
        lastErr = err;
        if (!isInfraSqliteError(err)) break;
        if (attempt < attempts) await sleep((this.opts.infraRetryDelayMs ?? 50) * 2 ** (attempt - 1));
      }
    }
    const failure = isInfraSqliteError(lastErr) ? new InfraError(lastErr) : lastErr;
    this.infraFailed = true;
    this.opts.onInfraFailure?.(lastErr);
    for (const job of batch) job.reject(failure);
  }

  /**
   * One transaction for the batch; throws (after ROLLBACK) only for errors that doom the whole batch.
   * Runs synchronously to the COMMIT when every closure returns a plain value.
   */
  private async runBatch(batch: Job<E>[]) {
    const { db, sql } = this;
    const outcomes: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    const events: E[] = [];
    const emit = (e: E) => events.push(e);
    sql.begin.run();
    try {
      for (const job of batch) {
        const mark = events.length;
        sql.savepoint.run();
        const handle = new ClosureSql(this.handle);
        try {
          let value = job.fn(handle, emit);
          if (value instanceof Promise) value = await this.deadline.settle(value);
          sql.release.run();
          outcomes.push({ ok: true, value });
        } catch (error) {
          if (isInfraSqliteError(error)) throw error;
          // A failed write's events go with its changes.
          events.length = mark;
          sql.rollbackTo.run();
          sql.release.run();
          this.opts.onRollback?.(db);
          outcomes.push({ ok: false, error });
        } finally {
          handle.revoke();
        }
      }
      const started = performance.now();
      sql.commit.run();
      return { outcomes, events, commitMs: performance.now() - started };
    } catch (err) {
      if (db.inTransaction) sql.rollback.run();
      this.opts.onRollback?.(db);
      throw err;
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
