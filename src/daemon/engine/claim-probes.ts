/**
 * A half-open breaker's probe is taken in memory by the claim round that admits its call, inside the round's
 * transaction. If that transaction does not commit — the writer runs the round again after a conflict, or the
 * write fails — the probe must be given back: no call was started for it, so no outcome will ever free it,
 * and the endpoint would stay half-open with its probe taken, admitting nothing, until the daemon restarts.
 */
import type { CircuitBreaker } from './breaker.js';
import type { Tx, Write } from './tx.js';

/** The probes one run of a claim round's closure took. */
export class RoundProbes {
  private readonly taken: CircuitBreaker[] = [];

  /** One call through `breaker` (its `canAdmit` checked), noting the probe if this took it. */
  admit(breaker: CircuitBreaker, now: number): void {
    const probing = breaker.probing;
    breaker.admit(1, now);
    if (!probing && breaker.probing) this.taken.push(breaker);
  }

  /** The call `breaker`'s probe was taken for will not start (its claim was lost): the probe is free again, if this round took it. */
  release(breaker: CircuitBreaker): void {
    const at = this.taken.indexOf(breaker);
    if (at === -1) return;
    this.taken.splice(at, 1);
    breaker.onInconclusive();
  }

  /** The run that took them did not commit: each probe is free again. */
  giveBack(): void {
    for (const breaker of this.taken.splice(0)) breaker.onInconclusive();
  }
}

/**
 * `round` as the closure of its own write, giving back the probes of every run of it that did not commit:
 * those of an earlier run when the writer runs it again, and those of the last when the write fails. A run
 * that commits keeps its probes: its claimed items' calls hold them.
 */
export async function claimInOwnWrite<R>(write: Write, round: (tx: Tx, probes: RoundProbes) => Promise<R>): Promise<R> {
  const probes = new RoundProbes();
  try {
    return await write((tx) => {
      probes.giveBack();
      return round(tx, probes);
    });
  } catch (err) {
    probes.giveBack();
    throw err;
  }
}
