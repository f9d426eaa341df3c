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

/** Starts one item in the given transaction (the completer's startWorkItem, bound to its context). */
type StartOne = (tx: Tx, itemId: string, claimed: BuiltRequest | null) => Promise<StartResult | null>;

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
  const startOne: StartOne = (tx, itemId, claimed) => startWorkItem(tx, ctx, itemId, claimed);
  if (dialect === 'postgres') return (itemId, claimed) => write((tx) => startOne(tx, itemId, claimed));
  const batches = new StartBatches(write, startOne);
  return (itemId, claimed) => batches.start(itemId, claimed);
}

interface Waiting {
  itemId: string;
  claimed: BuiltRequest | null;
  resolve: (started: StartResult | null) => void;
  reject: (err: unknown) => void;
}

class StartBatches {
  /** The closure still queued (not yet run by the writer), which a new start joins. */
  private open: Waiting[] | null = null;

  constructor(
    private readonly write: WriteOf,
    private readonly startOne: StartOne,
  ) {}

  /** The item's start (`startOne`), committed: in the closure queued now, or in a new one. */
  start(itemId: string, claimed: BuiltRequest | null): Promise<StartResult | null> {
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { itemId, claimed, resolve, reject };
      if (this.open) this.open.push(waiting);
      else this.queue((this.open = [waiting]));
    });
  }

  private queue(batch: Waiting[]): void {
    const startAll = async (tx: Tx) => {
      // Run by the writer: later starts open the next closure (a re-run keeps this one's items).
      if (this.open === batch) this.open = null;
      const results: (StartResult | null)[] = [];
      for (const w of batch) results.push(await this.startOne(tx, w.itemId, w.claimed));
      return results;
    };
    this.write(startAll).then(
      (results) => {
        for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i]!);
      },
      (err: unknown) => {
        // Not run (the writer refused it): no start may join it any more.
        if (this.open === batch) this.open = null;
        if (batch.length === 1) {
          batch[0]!.reject(err);
          return;
        }
        // One item's failure rolled back every item's start: each starts again alone, so only its own fails.
        for (const w of batch) this.write((tx) => this.startOne(tx, w.itemId, w.claimed)).then(w.resolve, w.reject);
      },
    );
  }
}
