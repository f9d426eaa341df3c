/**
 * What a call's outcome teaches the engine about its provider: the circuit breaker counts transient
 * failures (any answer resets it); the rate limiter reads an answer's x-ratelimit-* headers; a 429 holds
 * back every call of its model — not only the one that got it — until the provider's reset, cut to
 * `retry.max_provider_wait` (the provider's own value is logged when it was longer).
 */
import type { RateLimiter } from '../../domain/rate-limit.js';
import type { CircuitBreaker } from './breaker.js';
import type { CallOutcome } from './executor.js';
import type { Logger } from '../../core/logger.js';

export interface FeedbackTargets {
  breaker: CircuitBreaker;
  limiter: RateLimiter;
  log: Logger;
  endpoint: string;
  /** The wait after a 429 that named none. */
  defaultWaitMs: number;
}

/** When the engine must look at the queue again because of this outcome. */
export interface Feedback {
  /** The breaker opened: no call until then. */
  breakerReopensAt: number | null;
  /** A 429 held the model until then. */
  rateLimitedUntil: number | null;
}

export function learnFromOutcome(t: FeedbackTargets, model: string, outcome: CallOutcome, now: number): Feedback {
  return { breakerReopensAt: feedBreaker(t, outcome, now), rateLimitedUntil: feedLimiter(t, model, outcome, now) };
}

function feedBreaker(t: FeedbackTargets, outcome: CallOutcome, now: number): number | null {
  if (outcome.kind === 'response' || outcome.error.class === 'permanent') {
    t.breaker.onSuccess();
    return null;
  }
  if (outcome.error.class !== 'transient') {
    t.breaker.onInconclusive();
    return null;
  }
  if (!t.breaker.onTransientFailure(now)) return null;
  const s = t.breaker.snapshot();
  t.log.warn({ endpoint: t.endpoint, ...s }, `circuit breaker opened: no calls start until ${s.open_until}`);
  return t.breaker.reopensAt();
}

function feedLimiter(t: FeedbackTargets, model: string, outcome: CallOutcome, now: number): number | null {
  if (outcome.kind === 'response') {
    t.limiter.observe(model, outcome.rateLimit, now);
    return null;
  }
  if (outcome.error.code !== 'PROVIDER_RATE_LIMIT') return null;
  const { retryAfterMs, providerRetryAfterMs } = outcome.error;
  const until = now + (retryAfterMs ?? t.defaultWaitMs);
  t.limiter.park(model, until, now);
  const asked = providerRetryAfterMs !== undefined ? { provider_retry_after_ms: providerRetryAfterMs, capped_by: 'retry.max_provider_wait' } : {};
  const why =
    providerRetryAfterMs !== undefined ? ` (the provider asked for ${Math.round(providerRetryAfterMs / 1000)} s; cut to retry.max_provider_wait)` : '';
  t.log.warn({ model, until: new Date(until).toISOString(), ...asked }, `rate limited by the provider (429): no new calls of this model until the reset${why}`);
  return until;
}
