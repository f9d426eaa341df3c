/**
 * A write and what it sees. Every state change runs as a closure inside one writer transaction
 * (db/writer.ts: group commit, one fsync per batch); the closure gets a Tx: the connection, an event
 * sink whose events are published only if the transaction commits, the transaction's `now` (read once
 * from the injected clock, so every row it writes carries the same time) and the hooks the composition
 * root wired (the engine's: "a thread ended").
 *
 * `writeTx(writer, clock, hooks)` is the one way a Tx is made.
 */
import type Database from 'better-sqlite3';
import type { Clock } from './clock.js';
import type { Sql } from './sql.js';

export interface Tx<Event, Hooks> {
  readonly db: Database.Database;
  /** The writer's statement handle, for this closure's lifetime (await every statement). */
  readonly sql: Sql;
  /** Queues an event; published after the commit that made it true, dropped on rollback. */
  readonly emit: (event: Event) => void;
  /** Milliseconds since the epoch, from the clock, when the write began. */
  readonly now: number;
  readonly hooks: Hooks;
}

/** What runs write closures in transactions: db/writer.ts's Writer. */
export interface TxRunner<Event> {
  write<T>(fn: (db: Database.Database, emit: (event: Event) => void, sql: Sql) => T | Promise<T>): Promise<T>;
}

export type WriteTx<Event, Hooks> = <T>(fn: (tx: Tx<Event, Hooks>) => T | Promise<T>) => Promise<T>;

/** Runs each closure in one writer transaction, with `now` from `clock` and the given hooks. */
export function writeTx<Event, Hooks>(writer: TxRunner<Event>, clock: Clock, hooks: Hooks): WriteTx<Event, Hooks> {
  return (fn) => writer.write((db, emit, sql) => fn({ db, sql, emit, now: clock.now(), hooks }));
}
