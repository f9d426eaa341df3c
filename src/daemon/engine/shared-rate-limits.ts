/**
 * The rate limit of several daemons on one Postgres (issue 18): requests/min and tokens/min buckets and
 * the 429 park live in the database (db/rate-limits.ts), so N daemons together never exceed a route's
 * configured limit, and a 429 one daemon gets holds back every daemon's calls of that route until its
 * reset. The in-process `RateLimiter` (domain/rate-limit.ts) stays what one SQLite daemon uses; on
 * Postgres it keeps only the provider's `x-ratelimit-*` windows and a copy of this daemon's parks.
 */
import type { Sql } from '../../core/sql.js';
import { ensureSharedRateRow, getSharedRateRow, giveBackSharedRate, parkSharedRate, takeSharedRate, unparkSharedRate } from '../../db/rate-limits.js';
import { TokenBucket, type Admission, type ModelRateLimits } from '../../domain/rate-limit.js';

export interface SharedRateLimits {
  /** In the claim's transaction: takes a request and `tokens` for the route, or says until when not. */
  admit(sql: Sql, key: string, limits: ModelRateLimits, tokens: number, now: number): Promise<Admission>;
  /**
   * Puts back what `admit` took for a call that will not start: in the claim's transaction when its claim
   * was lost, or in a write of its own when the committed claim's start made no call (claim-admissions.ts).
   */
  giveBack(sql: Sql, key: string, limits: ModelRateLimits, tokens: number, now: number): Promise<void>;
  /** A 429: parks the route for every daemon until `until`. */
  park(sql: Sql, key: string, until: number, now: number): Promise<void>;
  /** Lifts the route's park for every daemon (`combine retry`). */
  unpark(sql: Sql, key: string): Promise<void>;
}

export const sharedRateLimits: SharedRateLimits = {
  async admit(sql, key, limits, tokens, now) {
    // No bucket configured (the default): only another daemon's 429 park can hold the call, and reading it
    // takes no row lock — taking one would make every daemon's claim rounds of this route queue on it.
    if (!hasBuckets(limits)) {
      const parkedUntil = await parkedUntilIn(sql, key, now);
      return parkedUntil > now ? { ok: false, retryAt: parkedUntil, reason: 'rate limited by the provider (429)' } : { ok: true };
    }
    await ensureSharedRateRow(sql, { model: key, now });
    const take = { model: key, now, rpm: limits.requestsPerMinute, tpm: limits.tokensPerMinute, tokens };
    if (await takeSharedRate(sql, take)) return { ok: true };
    const row = await getSharedRateRow(sql, key);
    if (!row) throw new Error(`rate limit row ${key} vanished inside the claim's transaction`);
    if (row.parked_until > now) return { ok: false, retryAt: row.parked_until, reason: 'rate limited by the provider (429)' };
    return { ok: false, ...bucketWait(row, limits, tokens, now) };
  },
  async giveBack(sql, key, limits, tokens, now) {
    // No bucket configured: the admission took nothing.
    if (!hasBuckets(limits)) return;
    await giveBackSharedRate(sql, { model: key, now, rpm: limits.requestsPerMinute, tpm: limits.tokensPerMinute, tokens });
  },
  // A park's change made through this handle is read again by its next admission.
  park: (sql, key, until, now) => {
    parksRead.get(sql)?.delete(key);
    return parkSharedRate(sql, { model: key, until, now });
  },
  unpark: (sql, key) => {
    parksRead.get(sql)?.delete(key);
    return unparkSharedRate(sql, key);
  },
};

/** Whether the route has a bucket configured (requests or tokens per minute): admission takes from the row then. */
export function hasBuckets(limits: ModelRateLimits): boolean {
  return limits.requestsPerMinute !== null || limits.tokensPerMinute !== null;
}

/**
 * The route's park, read once per claim round: the round's handle (`sql`) and time (`now`, the
 * transaction's) are the same for each item it claims, and each read the same row, a round trip per
 * claimed item. A park another daemon commits during the round is seen by the next round, a few ms
 * later — as one committed just after this round's read always was. A handle that outlives a
 * transaction (or another time) reads again.
 */
const parksRead = new WeakMap<Sql, Map<string, { now: number; parkedUntil: number }>>();

async function parkedUntilIn(sql: Sql, key: string, now: number): Promise<number> {
  let parks = parksRead.get(sql);
  const known = parks?.get(key);
  if (known !== undefined && known.now === now) return known.parkedUntil;
  const parkedUntil = (await getSharedRateRow(sql, key))?.parked_until ?? 0;
  if (!parks) {
    parks = new Map();
    parksRead.set(sql, parks);
  }
  parks.set(key, { now, parkedUntil });
  return parkedUntil;
}

/** When the emptier bucket will hold what the call needs: the row's levels, refilled to `now` as any bucket is. */
function bucketWait(
  row: { requests_level: number | null; tokens_level: number | null; updated_at: number },
  limits: ModelRateLimits,
  tokens: number,
  now: number,
): { retryAt: number; reason: string } {
  const readyAt = (capacity: number | null, level: number | null, need: number) =>
    capacity === null ? now : new TokenBucket(capacity, row.updated_at, level ?? capacity).readyAt(need, now);
  const requestsAt = readyAt(limits.requestsPerMinute, row.requests_level, 1);
  const tokensAt = readyAt(limits.tokensPerMinute, row.tokens_level, tokens);
  // At least 1 ms: the statement refused, so something was short even if rounding says otherwise.
  return requestsAt >= tokensAt
    ? { retryAt: Math.max(now + 1, requestsAt), reason: 'requests per minute' }
    : { retryAt: Math.max(now + 1, tokensAt), reason: 'tokens per minute' };
}
