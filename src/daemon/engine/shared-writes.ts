/**
 * An item's steps from many items in one write closure, on a writer that commits every closure of a
 * turn in one transaction anyway (SQLite's group commit). The starts of a start slice (start-slots.ts),
 * the responses that came back in one turn, the answers validated in one turn: one closure instead of
 * one per item spares each item its SAVEPOINT pair, the closure's own machinery, and the ledger append's
 * chain-head read and INSERT — the closure's entries are linked after one head read and inserted by one
 * multi-row INSERT.
 *
 * The failure boundary stays the item: a step that throws (a lease lost: StaleStateError) rolls back the
 * whole closure, and then each item's step runs again in a write of its own — so only that item's step
 * fails, as it would have alone. Steps are written to run again (a write closure may be re-run); a step
 * that ends its item without throwing (canceled thread, dead letter) is an ordinary result.
 *
 * Which items share a closure: those whose step is asked while it is queued, up to `MAX_SHARED`. It takes
 * its items when the writer runs it; a step asked later opens the next one.
 */
import { START_SLICE } from './start-slots.js';
import type { Tx } from './tx.js';

/**
 * Steps per shared closure: a start slice's (start-slots.ts). A closure must settle within the writer's
 * closure deadline, and 2,000 answers coming back together (bench target 6) are then ~30 closures, not one.
 */
const MAX_SHARED = START_SLICE;

type WriteOf = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;

/**
 * `one` as a committed write of its own: shared with the other items' where the writer commits a turn's
 * closures in one transaction (SQLite); alone on Postgres, whose writer runs each closure in a
 * transaction of its own on a pooled connection — there a shared closure would hold every item's row
 * locks for all its round trips, and the items' steps would run one after another instead of side by side.
 * `before`: work done once for a shared closure's steps before the first runs (see `SharedWrites`).
 */
export function itemWrite<A, R, S>(
  write: WriteOf,
  dialect: 'sqlite' | 'postgres',
  one: (tx: Tx, arg: A, shared: S | undefined) => Promise<R>,
  before?: (tx: Tx, args: readonly A[]) => Promise<S>,
): (arg: A) => Promise<R> {
  if (dialect === 'postgres') return (arg) => write((tx) => one(tx, arg, undefined));
  const shared = new SharedWrites(write, one, before);
  return (arg) => shared.run(arg);
}

const argOf = <A, R>(w: Waiting<A, R>): A => w.arg;

interface Waiting<A, R> {
  arg: A;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
}

/**
 * Runs `one(tx, arg)` for each `run(arg)`, those asked while a closure is queued in that one closure.
 * `before(tx, args)`, when given, runs first in a closure of several steps, and its result is each step's
 * `shared` (e.g. their rows read in one statement); a step that runs alone gets undefined.
 */
export class SharedWrites<A, R, S = undefined> {
  /** The closure still queued (not yet run by the writer), which a new run joins while it has room. */
  private open: Waiting<A, R>[] | null = null;

  constructor(
    private readonly write: WriteOf,
    private readonly one: (tx: Tx, arg: A, shared: S | undefined) => Promise<R>,
    private readonly before?: (tx: Tx, args: readonly A[]) => Promise<S>,
  ) {}

  /** `one(tx, arg)`, committed: in the closure queued now, or in a new one. */
  run(arg: A): Promise<R> {
    return new Promise((resolve, reject) => {
      const waiting: Waiting<A, R> = { arg, resolve, reject };
      if (this.open && this.open.length < MAX_SHARED) this.open.push(waiting);
      else this.queue((this.open = [waiting]));
    });
  }

  private queue(batch: Waiting<A, R>[]): void {
    const runAll = async (tx: Tx) => {
      // Run by the writer: later runs open the next closure (a re-run keeps this one's).
      if (this.open === batch) this.open = null;
      const shared = this.before && batch.length > 1 ? await this.before(tx, batch.map(argOf)) : undefined;
      const results: R[] = [];
      for (const w of batch) results.push(await this.one(tx, w.arg, shared));
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
        for (const w of batch) this.write((tx) => this.one(tx, w.arg, undefined)).then(w.resolve, w.reject);
      },
    );
  }
}
