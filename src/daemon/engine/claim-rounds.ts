/**
 * How many items one claim round takes. A round's items are leased together at its COMMIT and only then
 * start (lease-then-pay), and on Postgres each of its claims is a round trip or two (the candidate's read
 * and claim, its request's reads) on one connection: a round of 32 claims kept its first item from its
 * start until the last was claimed, and a slot freed meanwhile waited for the whole round before the next
 * could refill it. Bounded to a quarter of the slots, a full round is followed at once by the next
 * (engine.ts `tick`), whose claims run while the first round's items start: a daemon's first round of a
 * run, and the rounds that follow a closure of answers that freed many slots together, start their calls
 * sooner. SQLite's round is statements in process, no round trips: it takes every free slot as before.
 */
export function claimRoundLimit(free: number, maxInFlight: number, dialect: 'sqlite' | 'postgres'): number {
  if (dialect !== 'postgres') return free;
  return Math.min(free, Math.max(MIN_ROUND, Math.ceil(maxInFlight / ROUNDS_PER_REFILL)));
}

/** A round takes at least this many (the default max_in_flight: such a daemon's rounds are unchanged). */
const MIN_ROUND = 8;
/** Rounds that refill every slot, at most: a round's own statements (its heads' read, BEGIN, COMMIT) stay a few per item. */
const ROUNDS_PER_REFILL = 4;
