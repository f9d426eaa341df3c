/**
 * How many leased items may be starting at once: between their claim and their call (the prompt built,
 * the `prompt` entry and `running` written, the request handed to the provider). A claim round of
 * thousands of items then starts them in slices of at most `size`: each slice's start writes share a
 * commit, and its calls are sent before the next slice's prompts are built — so the prompts, ledger
 * entries and canonical JSON of one slice are garbage before the next is made, instead of every item's
 * being alive together until one huge commit that blocked the daemon's event loop for seconds. The claim
 * itself is untouched: one round decides fairness, budgets and locks.
 *
 * While items wait, a slot is given back on the next turn of the event loop (`setImmediate`), not at
 * once: by then the request has gone through the SDK to the socket, and the slots freed by one slice are
 * taken together, so the next slice's writes are queued in one turn and share one commit.
 */
export class StartSlots {
  private free: number;
  /** Items waiting for a slot, longest waiting first. */
  private readonly waiting: (() => void)[] = [];

  constructor(readonly size: number) {
    if (!Number.isInteger(size) || size < 1) throw new RangeError(`start slots must be a positive integer, got ${size}`);
    this.free = size;
  }

  /** Waits for a slot; every `take` is followed by one `giveBack`. Resolves true when it had to wait (a later slice). */
  take(): Promise<boolean> {
    if (this.free > 0) {
      this.free--;
      return Promise.resolve(false);
    }
    return new Promise((resolve) => this.waiting.push(() => resolve(true)));
  }

  /** Frees the slot: at once when no item waits, else on the next turn of the event loop (to the longest waiting). */
  giveBack(): void {
    if (this.waiting.length === 0) {
      this.free++;
      return;
    }
    setImmediate(() => {
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    });
  }
}

/**
 * The engine's slice: above the default max_in_flight (8), so a daemon of usual size starts a round as
 * before. Bench target 6 (load 3, medians of 3): 64 peaked at 218 MiB, 32 at 220, 256 at 240 (its
 * slice's start garbage outlives the young generation), all-at-once 219; target 1's engine (max_in_flight
 * 256) spent ~2 % more CPU per item with 64 than without slots.
 */
export const START_SLICE = 64;

/**
 * Answers between their arrival and their outcome at once (item-pipeline.ts `inAnswerSlot`), with the same
 * slots. Bench target 6 (2026-11-24, load 3–9), with the executor's one signal per call: peak 170/171 MiB
 * against 178/175 MiB on stage, medians of 3 (bench/README.md).
 */
export const ANSWER_SLOTS = 64;
