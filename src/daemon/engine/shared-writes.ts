/**
 * An item's steps from many items in one write closure. The starts of a start slice (start-slots.ts),
 * the responses that came back together, their answers: one closure instead of one per item spares each
 * item its transaction (Postgres) or SAVEPOINT pair (SQLite), the closure's own machinery, and the ledger append's
 * chain-head read and INSERT — the closure's entries are linked after one head read and inserted by one
 * multi-row INSERT. On Postgres the chain head is then taken once per closure instead of once per item:
 * every append holds it from its COMMIT's append through the WAL flush, so one daemon's appends ran one
 * transaction at a time.
 *
 * The failure boundary stays the item: a step that throws (a lease lost: StaleStateError) rolls back the
 * whole closure, which is not run again as a whole, and then each item's step runs again in a write of its own — so only that item's step
 * fails, as it would have alone. Steps are written to run again (a write closure may be re-run); a step
 * that ends its item without throwing (canceled thread, dead letter) is an ordinary result.
 *
 * Which items share a closure: those whose step is asked while it is queued, up to `MAX_SHARED`. It takes
 * its items when the writer runs it; a step asked later opens the next one. SQLite's writer commits every
 * closure of a turn in one transaction anyway; Postgres's runs each closure at once in a transaction of
 * its own, so there at most `inFlight` closures of a kind are handed to the writer at a time, and the steps
 * asked meanwhile gather in the next (a group commit: as many items per transaction as came while the last
 * one ran, one when the daemon is idle).
 */
import { InfraError, SharedStepStaleError, StaleStateError } from '../../core/errors.js';
import { compareIds } from '../../core/ids.js';
import { START_SLICE } from './start-slots.js';
import type { Tx } from './tx.js';

/**
 * Steps per shared closure: a start slice's (start-slots.ts). A closure must settle within the writer's
 * closure deadline, and 2,000 answers coming back together (bench target 6) are then ~30 closures, not one.
 */
const MAX_SHARED = START_SLICE;

type WriteOf = <T>(fn: (tx: Tx) => Promise<T>) => Promise<T>;

/**
 * `steps` of one item as a committed write: shared with the other items' steps asked while it waits (`SharedWrites`).
 * On SQLite every closure of a turn shares its transaction anyway; on Postgres (`inFlight` 1) a closure's
 * transaction holds its items' row locks for all its steps' round trips, so its steps' shared rows are
 * taken in one order across the closure (`orderBy`, and the locks `before` takes first: engine/tx.ts
 * LOCK ORDER).
 * `before`: work done once for a shared closure's steps before the first runs (see `SharedWrites`).
 */
export function itemWrite<A, R, S>(
  write: WriteOf,
  dialect: 'sqlite' | 'postgres',
  steps: Steps<A, R, S>,
  before: (tx: Tx, args: readonly A[]) => Promise<S>,
  postgres: { orderBy: (shared: S, arg: A) => string },
): (arg: A) => Promise<R> {
  const shared =
    dialect === 'sqlite' ? new SharedWrites(write, steps, before) : new SharedWrites(write, steps, before, { inFlight: 1, orderBy: postgres.orderBy });
  return (arg) => shared.run(arg);
}

/**
 * The steps of a closure's items, in the order given, each result at its step's index: one pass per
 * step (`eachStep`), or a function that does several items' work together (engine/starts.ts).
 */
export type Steps<A, R, S> = (tx: Tx, args: readonly A[], shared: S | undefined) => Promise<R[]>;

/** `Steps` that run `one` for each item in turn. */
export function eachStep<A, R, S>(one: (tx: Tx, arg: A, shared: S | undefined) => Promise<R>): Steps<A, R, S> {
  return async (tx, args, shared) => {
    const results: R[] = [];
    for (const arg of args) results.push(await one(tx, arg, shared));
    return results;
  };
}

const argOf = <A, R>(w: Waiting<A, R>): A => w.arg;

/** A step's index in its batch, with the key it runs in order of. */
interface KeyedIndex {
  readonly key: string;
  readonly index: number;
}

const byKey = (a: KeyedIndex, b: KeyedIndex): number => compareIds(a.key, b.key);

interface Waiting<A, R> {
  arg: A;
  resolve: (result: R) => void;
  reject: (err: unknown) => void;
}

/** How a `SharedWrites` hands its closures to the writer. */
export interface SharedWritesOptions<A, S> {
  /** Closures handed to the writer and not settled yet, at most (default: no bound); the rest wait, still open to steps. */
  inFlight?: number;
  /** The order a closure of several steps runs them in: ascending by this key (default: as they were asked). */
  orderBy?: (shared: S, arg: A) => string;
}

/**
 * Runs `steps` for each `run(arg)`, those asked while a closure is queued in that one closure together.
 * `before(tx, args)`, when given, runs first in a closure of several steps, and its result is each step's
 * `shared` (e.g. their rows read in one statement); a step that runs alone gets undefined.
 */
export class SharedWrites<A, R, S = undefined> {
  /** The closure not yet run by the writer, which a new run joins while it has room. */
  private open: Waiting<A, R>[] | null = null;
  /** Closures waiting for one of the `inFlight` places, oldest first (not handed to the writer yet). */
  private readonly held: Waiting<A, R>[][] = [];
  private sent = 0;

  constructor(
    private readonly write: WriteOf,
    private readonly steps: Steps<A, R, S>,
    private readonly before?: (tx: Tx, args: readonly A[]) => Promise<S>,
    private readonly opts: SharedWritesOptions<A, S> = {},
  ) {}

  /** `arg`'s step, committed: in the closure queued now, or in a new one. */
  run(arg: A): Promise<R> {
    return new Promise((resolve, reject) => {
      const waiting: Waiting<A, R> = { arg, resolve, reject };
      if (this.open && this.open.length < MAX_SHARED) this.open.push(waiting);
      else if (this.sent < (this.opts.inFlight ?? Number.POSITIVE_INFINITY)) this.queue((this.open = [waiting]));
      else this.held.push((this.open = [waiting]));
    });
  }

  private queue(batch: Waiting<A, R>[]): void {
    this.sent++;
    const runAll = async (tx: Tx) => {
      // Run by the writer: later runs open the next closure (a re-run keeps this one's).
      if (this.open === batch) this.open = null;
      const shared = this.before && batch.length > 1 ? await this.before(tx, batch.map(argOf)) : undefined;
      const order = this.runOrder(batch, shared);
      const args: A[] = [];
      for (const i of order) args.push(batch[i]!.arg);
      const inOrder = await this.steps(tx, args, shared).catch((err: unknown) => {
        // The writer would run a closure that met a stale guard again as a whole, up to its race attempts,
        // and each run would wait for the same step (a lost lease) to fail again: its steps run alone at once.
        throw batch.length > 1 && err instanceof StaleStateError ? new SharedStepStaleError(err) : err;
      });
      const results: R[] = new Array<R>(batch.length);
      for (const [at, i] of order.entries()) results[i] = inOrder[at]!;
      return results;
    };
    this.write(runAll)
      .then(
        (results) => {
          for (let i = 0; i < batch.length; i++) batch[i]!.resolve(results[i]!);
        },
        (err: unknown) => {
          // Not run (the writer refused it): nothing may join it any more.
          if (this.open === batch) this.open = null;
          // Storage failed, or the COMMIT's outcome is unknown (the connection broke during it): a step
          // run again alone now could repeat one that did commit. Each caller retries through its guards.
          if (batch.length === 1 || err instanceof InfraError) {
            for (const w of batch) w.reject(err);
            return;
          }
          // One failure rolled back every one's changes: each runs again alone, so only its own fails.
          for (const w of batch) this.write(async (tx) => (await this.steps(tx, [w.arg], undefined))[0]!).then(w.resolve, w.reject);
        },
      )
      .finally(() => {
        this.sent--;
        const next = this.held.shift();
        if (next) this.queue(next);
      });
  }

  /** The indexes of `batch` in the order its steps run. */
  private runOrder(batch: readonly Waiting<A, R>[], shared: S | undefined): number[] {
    // Loops: docs/design-notes.md "Closures made per call".
    const order: number[] = [];
    for (let i = 0; i < batch.length; i++) order.push(i);
    const orderBy = this.opts.orderBy;
    if (shared === undefined || !orderBy) return order;
    const keyed: KeyedIndex[] = [];
    for (let i = 0; i < batch.length; i++) keyed.push({ key: orderBy(shared, batch[i]!.arg), index: i });
    keyed.sort(byKey);
    for (let i = 0; i < keyed.length; i++) order[i] = keyed[i]!.index;
    return order;
  }
}
