/**
 * Whether a claimed item's route takes its call now: its endpoint's breaker, this daemon's rate limiter
 * and, sharing the database, the buckets and 429 park every daemon shares. Admitting takes the call's
 * request and tokens and, when the breaker is half-open, its probe (noted for the round: claim-admissions.ts).
 */
import type { CallEstimate } from '../../domain/budget.js';
import type { Admitted, RoundAdmissions } from './claim-admissions.js';
import type { RateLimiter } from '../../domain/rate-limit.js';
import type { ModelRoute, ModelRouter } from '../routing/router.js';
import { hasBuckets, type SharedRateLimits } from './shared-rate-limits.js';
import type { Tx } from './tx.js';

/** What admission reads of the engine's flow control (producer.ts `FlowControl`). */
type Limits = { router: ModelRouter; limiter: RateLimiter; sharedLimits?: SharedRateLimits | null };

/** What admission notes on the claim round (producer.ts `ClaimRound`): when to look again, and a breaker's hold. */
type RoundHolds = { limitedUntil: number | null; breakerHeld: boolean };

/**
 * What the route's admission of the call took (`routeWait`), or null when it does not take the call now:
 * then when the round looks again is noted in `round`.
 */
export async function admissionOf(
  tx: Tx,
  flow: Limits,
  route: ModelRoute,
  estimate: CallEstimate,
  round: RoundHolds,
  admissions: RoundAdmissions,
): Promise<Admitted | null> {
  // Each endpoint's breaker and each route's rate limit hold back only their own calls.
  const wait = flow.sharedLimits
    ? await routeWait(tx, flow, flow.sharedLimits, route, estimate.tokens, round, admissions)
    : routeWaitHere(tx, flow, route, estimate.tokens, round, admissions);
  if (typeof wait === 'object' && wait !== null) return wait;
  if (wait !== null) round.limitedUntil = Math.min(round.limitedUntil ?? wait, wait);
  return null;
}

/**
 * The call `admissionOf` let through will not start (its claim was lost): what it took is free again —
 * this daemon's limiter and breaker now, and, sharing the database, the shared buckets' share, which
 * would otherwise commit with the round.
 */
export async function releaseAdmission(tx: Tx, flow: Limits, route: ModelRoute, estimate: CallEstimate, admissions: RoundAdmissions): Promise<void> {
  admissions.release(route.key, tx.now);
  await flow.sharedLimits?.giveBack(tx.sql, route.key, flow.router.rateLimitsOf(route.key), estimate.tokens, tx.now);
}

/**
 * Whether the route can take a call now: its endpoint's breaker (closed, or half-open with its probe
 * free) and its rate limits. Admitted: it took the request, the tokens and, when half-open, the probe;
 * otherwise when to look again (null: when something wakes the engine, e.g. the probe's outcome).
 */
async function routeWait(
  tx: Tx,
  flow: Limits,
  sharedLimits: SharedRateLimits,
  route: ModelRoute,
  tokens: number,
  round: RoundHolds,
  admissions: RoundAdmissions,
): Promise<Admitted | number | null> {
  const held = localHold(tx, flow, route, tokens, round);
  if (held !== undefined) return held;
  // Sharing the database, this daemon's limiter has no buckets (config/flow.ts), only the provider's
  // windows, which nothing gives back (domain/rate-limit.ts): a refusal here leaves nothing to return.
  const capacities = flow.router.rateLimitsOf(route.key);
  const shared = await sharedLimits.admit(tx.sql, route.key, capacities, tokens, tx.now);
  if (!shared.ok) return shared.retryAt;
  // What a start that makes no call gives back (item-pipeline.ts): only a configured bucket was taken from.
  return admitCall(tx, flow, route, tokens, admissions, hasBuckets(capacities) ? { limits: sharedLimits, capacities } : null);
}

/** `routeWait` of a daemon alone on its database (no shared rate limits): decided in memory, no await. */
function routeWaitHere(tx: Tx, flow: Limits, route: ModelRoute, tokens: number, round: RoundHolds, admissions: RoundAdmissions): Admitted | number | null {
  const held = localHold(tx, flow, route, tokens, round);
  if (held !== undefined) return held;
  return admitCall(tx, flow, route, tokens, admissions, null);
}

/** The breaker's admission of a call the limiter admitted, both noted for the round (given back if no call follows). */
function admitCall(tx: Tx, flow: Limits, route: ModelRoute, tokens: number, admissions: RoundAdmissions, shared: Admitted['shared']): Admitted {
  return admissions.admit({ breaker: flow.router.breaker(route), limiter: flow.limiter, route: route.key, tokens, shared }, tx.now);
}

/** The route's breaker and this daemon's rate limiter: when to look again if either holds the call back, else undefined. */
function localHold(tx: Tx, flow: Limits, route: ModelRoute, tokens: number, round: RoundHolds): number | null | undefined {
  const breaker = flow.router.breaker(route);
  if (!breaker.canAdmit(tx.now)) {
    round.breakerHeld = true;
    return breaker.reopensAt();
  }
  const admission = flow.limiter.admit(route.key, tokens, tx.now);
  return admission.ok ? undefined : admission.retryAt;
}
