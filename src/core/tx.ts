/**
 * A write and what it sees. Every state change runs as a closure inside a writer transaction (SQLite:
 * db/writer.ts, group commit, one fsync per batch; Postgres: db/pg/writer.ts, a transaction per write on
 * a pooled connection); the closure gets a Tx: the statement handle, an event sink whose events are
 * published only if the transaction commits, the transaction's `now` (read once from the injected clock,
 * so every row it writes carries the same time) and the hooks the composition root wired (the engine's:
 * "a thread ended").
 *
 * `writeTx(writer, clock, hooks)` is the one way a Tx is made.
 */
import type { Clock } from './clock.js';
import type { Sql } from './sql.js';

export interface Tx<Event, Hooks> {
  /** The writer's statement handle, for this closure's lifetime (await every statement). */
  readonly sql: Sql;
  /** Queues an event; published after the commit that made it true, dropped on rollback. */
  readonly emit: (event: Event) => void;
  /** Milliseconds since the epoch, from the clock, when the write began. */
  readonly now: number;
  readonly hooks: Hooks;
  /**
   * Runs `step` after the closure's body has settled, as the transaction's last statements (in the order
   * the steps were given; a step may add more). What a write appends to a globally shared row (the ledger's
   * chain head) goes there, so that row stays locked only for those statements and the COMMIT.
   */
  readonly atEnd: (step: () => Promise<void>) => void;
}

export type Emit<E> = (event: E) => void;

/**
 * A write closure: `sql` is the transaction's handle, valid until the closure settles. It may await only
 * its statements (never a provider call or a timer), and it may run more than once: a writer re-runs it
 * when the transaction failed for a reason that says nothing about the closure (a busy or broken
 * connection, a Postgres deadlock), so everything it does goes through `sql` and `emit`.
 */
export type WriteFn<T, E> = (sql: Sql, emit: Emit<E>) => T | Promise<T>;

/**
 * What runs write closures in transactions — the one contract both backends' writers keep:
 * `write(fn)` settles after the COMMIT that made `fn`'s changes durable (or with `fn`'s error, its
 * changes rolled back); the events `fn` emitted are published after that commit, never for a rolled-back
 * write; storage failures reach the caller as InfraError (core/errors.ts), after bounded retries.
 */
export interface TxRunner<Event> {
  write<T>(fn: WriteFn<T, Event>): Promise<T>;
  /** Writes accepted but not yet running (waiting for the batch or for a connection). */
  readonly pending: number;
  /** Refuses new writes; resolves once the writes already accepted have settled. */
  close(): Promise<void>;
}

export type WriteTx<Event, Hooks> = <T>(fn: (tx: Tx<Event, Hooks>) => T | Promise<T>) => Promise<T>;

/** Runs each closure in one writer transaction, with `now` from `clock` and the given hooks. */
export function writeTx<Event, Hooks>(writer: Pick<TxRunner<Event>, 'write'>, clock: Clock, hooks: Hooks): WriteTx<Event, Hooks> {
  return (fn) =>
    writer.write((sql, emit) => {
      const steps: (() => Promise<void>)[] = [];
      const value = fn({ sql, emit, now: clock.now(), hooks, atEnd: (step) => steps.push(step) });
      // A closure that deferred nothing and returned a plain value stays synchronous (SQLite's batch then
      // runs to its COMMIT without yielding).
      if (steps.length === 0 && !(value instanceof Promise)) return value;
      return runSteps(value, steps);
    });
}

/** The closure's value once its body and then its deferred steps have run. */
async function runSteps<T>(value: T | Promise<T>, steps: (() => Promise<void>)[]): Promise<T> {
  const settled = await value;
  for (let i = 0; i < steps.length; i++) await steps[i]!();
  return settled;
}
