/**
 * The starts of one start slice (start-slots.ts) in one write closure, on a writer that commits every
 * closure of a turn in one transaction anyway (SQLite's group commit). One closure instead of one per
 * item spares each item its SAVEPOINT pair, the closure's own machinery, and the ledger append's
 * chain-head read and INSERT: the slice's `prompt` entries are linked after one head read and inserted
 * by one multi-row INSERT.
 *
 * The failure boundary stays the item: a start that throws (a lease lost: StaleStateError) rolls back
 * the whole closure, and then each item of it starts again in a write of its own — so only that item's
 * start fails, as it would have alone. Starts are written to run again (a write closure may be re-run),
 * and a start that ends its item without throwing (canceled thread, target gone) is an ordinary result.
 *
 * Which items share a closure: those that ask while it is queued. It takes its items when the writer
 * runs it; an item asking later opens the next one. A slice's items ask within one turn of the event
 * loop (start-slots.ts), so a slice is usually one closure; the number is bounded by the slice's size.
 */
import type { BuiltRequest } from './request.js';
import { startWorkItem, type StartResult } from './completer.js';
import type { EngineContext } from './leased.js';
import type { Tx } from './tx.js';

/** An item's start, committed. */
export type StartItem = (itemId: string, claimed: BuiltRequest | null) => Promise<StartResult | null>;

type WriteOf = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;

/**
 * How the engine starts its items: in shared closures where the writer commits a turn's closures in one
 * transaction (SQLite); one write each on Postgres, whose writer runs each closure in a transaction of
 * its own on a pooled connection — there one closure for a slice would hold every item's row locks for
 * all its round trips, and the starts would run one after another instead of side by side.
 */
export function itemStarts(write: WriteOf, ctx: EngineContext, dialect: 'sqlite' | 'postgres'): StartItem {
  type Start = { itemId: string; claimed: BuiltRequest | null };
  const startOne = (tx: Tx, s: Start) => startWorkItem(tx, ctx, s.itemId, s.claimed);
  if (dialect === 'postgres') return (itemId, claimed) => write((tx) => startOne(tx, { itemId, claimed }));
  const shared = new SharedWrites(write, startOne);
  return (itemId, claimed) => shared.run({ itemId, claimed });
}

interface Waiting<A, R> {
  arg: A;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
}

/** Runs `one(tx, arg)` for each `run(arg)`, those asked while a closure is queued in that one closure. */
export class SharedWrites<A, R> {
  /** The closure still queued (not yet run by the writer), which a new run joins. */
  private open: Waiting<A, R>[] | null = null;

  constructor(
    private readonly write: WriteOf,
    private readonly one: (tx: Tx, arg: A) => Promise<R>,
  ) {}

  /** `one(tx, arg)`, committed: in the closure queued now, or in a new one. */
  run(arg: A): Promise<R> {
    return new Promise((resolve, reject) => {
      const waiting: Waiting<A, R> = { arg, resolve, reject };
      if (this.open) this.open.push(waiting);
      else this.queue((this.open = [waiting]));
    });
  }

  private queue(batch: Waiting<A, R>[]): void {
    const runAll = async (tx: Tx) => {
      // Run by the writer: later runs open the next closure (a re-run keeps this one's).
      if (this.open === batch) this.open = null;
      const results: R[] = [];
      for (const w of batch) results.push(await this.one(tx, w.arg));
      return results;
    };
    this.write(runAll).then(
      (results) => {
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i]!);
      },
      (err: unknown) => {
        // Not run (the writer refused it): nothing may join it any more.
        if (this.open === batch) this.open = null;
        if (batch.length === 1) {
          batch[0]!.reject(err);
          return;
        }
        // One failure rolled back every one's changes: each runs again alone, so only its own fails.
        for (const w of batch) this.write((tx) => this.one(tx, w.arg)).then(w.resolve, w.reject);
      },
    );
  }
}
