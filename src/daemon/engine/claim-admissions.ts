/**
 * What a claim round's admissions take in memory, inside the round's transaction: a call's request and
 * tokens from this daemon's rate limiter and, when its endpoint's breaker is half-open, the probe. If the
 * transaction does not commit — the writer runs the round again after a conflict, or the write fails — or
 * the claim they were taken for is lost, no call follows, and nothing else would give them back: a probe
 * kept would hold the endpoint half-open with nothing to free it (no call through it would start until the
 * daemon restarts); tokens kept would hold later calls back until the limiter's minute refilled them.
 * A write whose COMMIT's outcome is unknown gives them back too: the engine launches none of its claims
 * (their leases lapse, and the recovery scan's claims admit their calls anew).
 * Sharing the database, the shared buckets' share is a row of the round's transaction: it rolls back with
 * a run that does not commit, and a lost claim gives it back by a statement (route-admission.ts
 * `releaseAdmission`). A committed claim whose start makes no call gives it back in a write of its own,
 * after the start's and outside its start slot (`giveBackShared`; none after a start that failed on storage,
 * whose share refills): not in the start's transaction, which holds item and thread rows
 * and may take a budget lock, while a claim round holds the rate row as it waits for a budget lock (LOCK
 * ORDER, engine/tx.ts). Best-effort, as the buckets are: a crash between the two loses the share until
 * the bucket refills.
 */
import type { Clock } from '../../core/clock.js';
import type { ModelRateLimits, RateLimiter } from '../../domain/rate-limit.js';
import type { CircuitBreaker } from './breaker.js';
import type { SharedRateLimits } from './shared-rate-limits.js';
import type { Tx, Write } from './tx.js';

/** One admitted call: where it goes and what it took. */
interface CallAdmission {
  breaker: CircuitBreaker;
  limiter: RateLimiter;
  /** The route's key: the limiter's model. */
  route: string;
  /** The tokens its estimate took from the limiter (with one request). */
  tokens: number;
  /**
   * Sharing the database with a bucket configured for the route: the shared buckets and the route's
   * capacities, from which the round's transaction took the call's request and tokens. Null: it took none.
   */
  shared: { limits: SharedRateLimits; capacities: ModelRateLimits } | null;
}

/** What one admission took: the call's request and tokens, and the half-open breaker's probe if it took it. */
export type Admitted = CallAdmission & { readonly probe: boolean };

/** The admissions one run of a claim round's closure made. */
export class RoundAdmissions {
  private readonly taken: Admitted[] = [];

  /**
   * One call through `call.breaker` (its `canAdmit` checked), whose request and tokens `call.limiter` just
   * admitted: takes the breaker's admission and notes both (the probe only if this took it). The claimed
   * item keeps what it returns, to give back if its start makes no call (`giveBackAdmission`).
   */
  admit(call: CallAdmission, now: number): Admitted {
    const probing = call.breaker.probing;
    call.breaker.admit(1, now);
    const admitted = { ...call, probe: !probing && call.breaker.probing };
    this.taken.push(admitted);
    return admitted;
  }

  /** The call last admitted on `route` will not start (its claim was lost): what it took is free again. */
  release(route: string, now: number): void {
    for (let at = this.taken.length - 1; at >= 0; at--) {
      if (this.taken[at]!.route !== route) continue;
      giveBackAdmission(this.taken.splice(at, 1)[0]!, now);
      return;
    }
  }

  /** The run that made them did not commit: what each admission took is free again. */
  giveBack(now: number): void {
    for (const admission of this.taken.splice(0)) giveBackAdmission(admission, now);
  }
}

/** What `a` took is free again: no call follows it (a run that did not commit, a lost claim, a start that sent nothing). */
export function giveBackAdmission(a: Admitted, now: number): void {
  a.limiter.giveBack(a.route, a.tokens, now);
  if (a.probe) a.breaker.onInconclusive();
}

/**
 * In a write of its own, after the start of `a`'s committed claim made no call: the shared buckets' share
 * `a` took is free again for every daemon (nothing when it took none). Takes only the route's rate row.
 */
export async function giveBackShared(tx: Tx, a: Admitted): Promise<void> {
  if (a.shared) await a.shared.limits.giveBack(tx.sql, a.route, a.shared.capacities, a.tokens, tx.now);
}

/**
 * `round` as the closure of its own write, giving back the admissions of every run of it that did not
 * commit: those of an earlier run when the writer runs it again, and those of the last when the write
 * fails. A run that commits keeps them: its claimed items' calls hold them.
 */
export async function claimInOwnWrite<R>(write: Write, clock: Clock, round: (tx: Tx, admissions: RoundAdmissions) => Promise<R>): Promise<R> {
  const admissions = new RoundAdmissions();
  try {
    return await write((tx) => {
      admissions.giveBack(clock.now());
      return round(tx, admissions);
    });
  } catch (err) {
    admissions.giveBack(clock.now());
    throw err;
  }
}
