/**
 * The Postgres writer: the same contract as the SQLite Writer (core/tx.ts TxRunner) — `write(fn)`
 * settles after the COMMIT that made fn's changes durable, events are published after that commit and
 * never for a rolled-back write, storage failures reach the caller as InfraError — but each write runs
 * in its own transaction on a pooled connection, several at once. There is no group commit: Postgres
 * already shares fsyncs among concurrent committers, and one transaction per write keeps the row locks
 * a write takes (the ledger's chain head among them) for the shortest time.
 *
 * Isolation is READ COMMITTED: every state change is a guarded statement, which Postgres re-checks
 * against the committed row after waiting for another transaction's lock, so two writers cannot both
 * win. A transaction Postgres aborts to break a deadlock or a serialization conflict changed nothing;
 * its closure runs again, a bounded number of times.
 *
 * Failures, classified once (db/errors.ts):
 *   - the closure throws (a logic error): ROLLBACK, the caller gets the error;
 *   - the server refuses a value of the write (a data exception: a NUL, a number out of range): ROLLBACK;
 *     refused before sending, by the COMMIT query while it was built: the connection is closed instead
 *     (statements noted as prepared on it were never sent). Either way the caller gets a RefusedValueError
 *     — that write's own permanent failure, not storage trouble, so not retried and health stays ready;
 *   - a conflict (40P01, 40001): ROLLBACK, the closure runs again (≤ `conflictAttempts`), then InfraError;
 *   - a prepared statement whose plan went stale (the schema changed under this connection: another daemon
 *     migrated the database): the transaction was aborted, nothing applied; the connection is closed, not
 *     rolled back and reused (it would fail the same way on every stale statement), and the closure runs
 *     again on another connection (≤ the pool's size + 1: each such run closes one of its connections that
 *     prepared statements before the change) — the same re-run as a conflict's, then InfraError;
 *   - a stale guard or a taken unique key: ROLLBACK, the closure runs again (≤ `raceAttempts`): another
 *     transaction committed first, and a new run decides on what it committed — as the SQLite writer's
 *     closures, which run one at a time, always do. Still failing, the error goes to the caller as is;
 *   - the server or the connection fails before COMMIT was sent: nothing was committed; retried with
 *     backoff (≤ `infraAttempts`), then InfraError and `onInfraFailure` (health turns unready);
 *   - the connection fails while COMMIT is under way: whether it committed is unknown, so it is NOT run
 *     again here; the caller gets InfraError and retries through its guards (a second run of a guarded
 *     write that did commit changes nothing and says so).
 */
import type pg from 'pg';
import { InfraError } from '../../core/errors.js';
import type { Emit, TxRunner, WriteFn } from '../../core/tx.js';
import { asClientError, isConcurrentChange, isInfraPgError, isStalePreparedStatement, isTransactionConflict } from '../errors.js';
import type { SqlParams } from '../../core/sql.js';
import { ClosureSql, settleClosure } from '../sql.js';
import { type CommitQuery, type CommitStatement, commitQuery } from './commit-query.js';
import { withCallerStack } from './sql.js';
import { submitSimple } from './statement-query.js';
import { lastCommand, type Notification } from './notifications.js';
import { PgTransactionSql } from './transaction-sql.js';

export interface PgWriterOptions<E> {
  /** Receives the events of each committed write, in order. */
  publish?: (events: E[]) => void;
  onCommit?: (info: { writes: number; commitMs: number }) => void;
  onInfraFailure?: (err: unknown) => void;
  onInfraRecovered?: () => void;
  /**
   * Called when a write is rolled back, with its connection (`Sql.connection`), before the connection
   * does anything else: caches that saw the write's uncommitted rows on it must forget them.
   */
  onRollback?: (connection: object) => void;
  /**
   * What other daemons on the database should be told about a write's events: sent with `pg_notify` in
   * the write's transaction, so they arrive at its COMMIT and never for a rollback.
   */
  notificationsOf?: (events: E[]) => Notification[];
  /** Runs of a closure whose transaction Postgres aborted for a deadlock or serialization conflict (default 5). */
  conflictAttempts?: number;
  /** Runs of a closure that failed on a stale guard or a taken unique key (default 3). */
  raceAttempts?: number;
  /** Attempts for a write whose connection failed before COMMIT (default 4). */
  infraAttempts?: number;
  infraRetryDelayMs?: number;
  /**
   * A closure still pending after this long fails (default 30 s): it holds a connection and its locks.
   * Longer than SQLite's 5 s because here every statement is a round trip to the server: a bulk
   * command's one transaction (generate-all over 10,000 epics writes 20,000 rows; cancel ends every
   * child) took over 5 s on a loaded 2-core machine, and the CLI waits 30 s for it (BULK_CALL_TIMEOUT_MS).
   * Other writes go on meanwhile on other connections; only this one's rows stay locked.
   */
  closureTimeoutMs?: number;
  /** The delay before re-running a conflicted closure, from the attempt number (default: 1–5 ms × attempt, random). */
  conflictDelayMs?: (attempt: number) => number;
}

type Failure = { error: unknown; atCommit: boolean };

export class PgWriter<E = never> implements TxRunner<E> {
  private closed = false;
  private waiting = 0;
  private running = 0;
  private infraFailed = false;
  private idle: (() => void)[] = [];

  constructor(
    private readonly pool: pg.Pool,
    private readonly opts: PgWriterOptions<E> = {},
  ) {}

  /** Runs `fn` in a transaction of its own; resolves with its result once committed. */
  async write<T>(fn: WriteFn<T, E>): Promise<T> {
    if (this.closed) throw new Error('writer is closed');
    this.running++;
    try {
      return await this.writeWithRetries(fn);
    } finally {
      this.running--;
      if (this.running === 0) for (const resolve of this.idle.splice(0)) resolve();
    }
  }

  /** Writes waiting for a connection from the pool. */
  get pending(): number {
    return this.waiting;
  }

  /** Refuses new writes; resolves once the writes already running have settled. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.running > 0) await new Promise<void>((resolve) => this.idle.push(resolve));
  }

  private async writeWithRetries<T>(fn: WriteFn<T, E>): Promise<T> {
    const conflictAttempts = this.opts.conflictAttempts ?? 5;
    const infraAttempts = this.opts.infraAttempts ?? 4;
    const raceAttempts = this.opts.raceAttempts ?? 3;
    let conflicts = 0;
    let races = 0;
    let infra = 0;
    let stalePlans = 0;
    for (;;) {
      const outcome = await this.attempt(fn);
      if ('value' in outcome) {
        if (this.infraFailed) {
          this.infraFailed = false;
          this.opts.onInfraRecovered?.();
        }
        return outcome.value;
      }
      const { error, atCommit } = outcome.failure;
      if (isTransactionConflict(error)) {
        if (++conflicts < conflictAttempts) {
          await sleep(this.opts.conflictDelayMs?.(conflicts) ?? (1 + Math.random() * 4) * conflicts);
          continue;
        }
        throw new InfraError(error);
      }
      if (isConcurrentChange(error) && ++races < raceAttempts) continue;
      if (isStalePreparedStatement(error)) {
        if (++stalePlans <= (this.pool.options.max ?? 10)) continue;
        // Still stale after every connection could have been replaced: storage trouble, retried as such upstream.
        throw new InfraError(error);
      }
      if (!isInfraPgError(error)) throw error;
      if (!atCommit && ++infra < infraAttempts) {
        await sleep((this.opts.infraRetryDelayMs ?? 50) * 2 ** (infra - 1));
        continue;
      }
      this.infraFailed = true;
      this.opts.onInfraFailure?.(error);
      throw new InfraError(error);
    }
  }

  /** One transaction: BEGIN (with the closure's first statement), the closure, COMMIT; events published after the commit. */
  private async attempt<T>(fn: WriteFn<T, E>): Promise<{ value: T } | { failure: Failure }> {
    let client: pg.PoolClient;
    this.waiting++;
    try {
      client = await this.pool.connect();
    } catch (error) {
      return { failure: { error, atCommit: false } };
    } finally {
      this.waiting--;
    }
    const queued: CommitStatement[] = [];
    // BEGIN goes with the closure's first statement (transaction-sql.ts), or with COMMIT if it sends none.
    const tx = new PgTransactionSql(client);
    const handle = new CommitClosureSql(tx, queued);
    const events: E[] = [];
    const emit: Emit<E> = (e) => events.push(e);
    let atCommit = false;
    let broken: Error | undefined;
    let value: unknown;
    let result: pg.QueryResult | pg.QueryResult[];
    let commitMs: number;
    let query: CommitQuery | undefined;
    let preparing = false;
    try {
      value = fn(handle, emit);
      if (value instanceof Promise) value = await settleClosure(value, this.opts.closureTimeoutMs ?? 30_000);
      handle.revoke();
      const notes = events.length > 0 && this.opts.notificationsOf ? this.opts.notificationsOf(events) : [];
      atCommit = true;
      const started = performance.now();
      // Until the query is built: one that refuses a value (commit-query.ts) may have noted statements as
      // prepared on this connection that it never sends, so the connection is then closed, not reused.
      preparing = true;
      // The statements queued for the commit (the ledger append) and the notifications go in COMMIT's round
      // trip: the last thing a write sends is one query.
      query = commitQuery(client, queued, notes, tx.begun);
      preparing = query.preparing.length > 0;
      result = await submitSimple(client, query.text, query.shapes).catch(withCallerStack);
      // A transaction in which a statement failed answers COMMIT with ROLLBACK: nothing was applied.
      if (lastCommand(result) !== 'COMMIT') throw new Error('the transaction was rolled back at COMMIT (a statement in it had failed)');
      commitMs = performance.now() - started;
    } catch (error) {
      handle.revoke();
      // Forget first: the uncommitted rows stay invisible to everyone else until ROLLBACK ends.
      this.opts.onRollback?.(client);
      // A stale plan the closure caught still aborted the transaction: what failed after it is its consequence.
      const failed = tx.stalePlan ?? error;
      const infra = isInfraPgError(failed);
      // A failed COMMIT query that was to prepare statements may not have reached their PREPARE (commit-query.ts):
      // its connection is closed (which ends the transaction) rather than reused with a wrong idea of them.
      // So is one whose prepared plan went stale: its other statements prepared before the change would fail too.
      if (infra || preparing || isStalePreparedStatement(failed)) broken = failed as Error;
      // Also after the COMMIT query failed: the notifications sent before COMMIT in it may have failed
      // and left the transaction open (ROLLBACK outside a transaction only warns).
      else broken = await rollback(client);
      // Only a failed connection leaves COMMIT's outcome unknown; any other error there means rolled back.
      return { failure: { error: asClientError(failed), atCommit: atCommit && infra } };
    } finally {
      // A connection that failed, or might be mid-transaction, is closed rather than reused.
      client.release(broken ?? false);
    }
    // Committed, outside the try: a throw from here on reaches the caller as is, never as a rollback
    // (which would run the closure again). The queued statements' rows go to their callers before the
    // events are published.
    const results = result as pg.QueryResult[];
    for (const [i, statement] of queued.entries()) statement.committed(results[query!.resultIndex[i]!]!.rows);
    this.opts.onCommit?.({ writes: 1, commitMs });
    if (events.length > 0) this.opts.publish?.(events);
    return { value: value as T };
  }
}

/** The closure's handle, which can also queue statements for the COMMIT's query (core/sql.ts `atCommit`). */
class CommitClosureSql extends ClosureSql {
  constructor(
    inner: PgTransactionSql,
    private readonly queued: CommitStatement[],
  ) {
    super(inner);
  }

  readonly atCommit = (text: string, params: SqlParams, committed: (rows: unknown[]) => void): void => {
    if (this.revoked) throw new Error('a statement was queued for the COMMIT after its write closure ended');
    this.queued.push({ text, params, committed });
  };
}

/** ROLLBACK; the error if it failed (the connection is then unusable). */
async function rollback(client: pg.PoolClient): Promise<Error | undefined> {
  try {
    await client.query('ROLLBACK');
    return undefined;
  } catch (err) {
    return err as Error;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}
