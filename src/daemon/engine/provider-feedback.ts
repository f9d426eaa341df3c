/**
 * What a call's outcome teaches the engine about its provider: the circuit breaker counts transient
 * failures (any answer resets it); the rate limiter reads an answer's x-ratelimit-* headers; a 429 holds
 * back every call of its model — not only the one that got it — until the provider's reset, cut to
 * `retry.max_provider_wait` (the provider's own value is logged when it was longer). `ProviderHolds`
 * keeps those holds for the engine's claim loop.
 */
import type { RateLimiter } from '../../domain/rate-limit.js';
import type { CircuitBreaker } from './breaker.js';
import type { CallOutcome } from './executor.js';
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/logger.js';
import type { ModelRoute } from '../routing/router.js';
import type { FlowControl } from './producer.js';
import type { SharedRateLimits } from './shared-rate-limits.js';
import type { Tx, Write } from './tx.js';

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

/** What `ProviderHolds` works with: the engine's flow control, and how it looks at the queue again. */
export interface ProviderHoldsDeps {
  flow: Pick<FlowControl, 'router' | 'limiter' | 'sharedLimits'>;
  clock: Clock;
  log: Logger;
  /** The wait after a 429 that named none (the operations' default retry base). */
  defaultWaitMs: () => number;
  write: Write;
  /** Look at the queue again at this time (a breaker reopens, a 429 park ends). */
  scheduleAt: (at: number) => void;
  wake: () => void;
}

/**
 * The holds the engine's provider feedback puts on claims: what each call teaches the breaker and the
 * rate limiter (`learnFromOutcome`), the earliest time a held model may be called again, and — several
 * daemons on one database — the 429 parks shared with the others. Nothing here feeds correctness: a
 * hold only delays claims.
 */
export class ProviderHolds {
  /** A rate limit holds claims back (a 429, or a claim round the limiter refused): the earliest time to try again. */
  limitedUntil: number | null = null;

  constructor(private readonly d: ProviderHoldsDeps) {}

  /** Lets the route's breaker and rate limiter learn from a call; looks at the queue again when they allow calls again. */
  observe(route: ModelRoute, outcome: CallOutcome): void {
    const { d } = this;
    const targets = {
      breaker: d.flow.router.breaker(route),
      limiter: d.flow.limiter,
      log: d.log,
      endpoint: route.endpoint.label,
      defaultWaitMs: d.defaultWaitMs(),
    };
    const f = learnFromOutcome(targets, route.key, outcome, d.clock.now());
    if (f.rateLimitedUntil !== null) this.limitedUntil = Math.max(this.limitedUntil ?? 0, f.rateLimitedUntil);
    if (f.rateLimitedUntil !== null) this.share((s, tx) => s.park(tx.sql, route.key, f.rateLimitedUntil!, tx.now));
    for (const at of [f.breakerReopensAt, f.rateLimitedUntil]) if (at !== null) d.scheduleAt(at);
  }

  /** Per model: whether a 429 has parked it, and until when. */
  snapshot() {
    return this.d.flow.limiter.snapshot(this.d.clock.now());
  }

  /** When the latest 429 hold of these routes ends (null: none held), for `combine thread`. */
  heldUntil(keys: readonly string[]): number | null {
    const now = this.d.clock.now();
    const until = keys.map((k) => this.d.flow.limiter.parkedUntil(k, now)).filter((t): t is number => t !== null);
    return until.length > 0 ? Math.max(...until) : null;
  }

  /** `combine retry` of a held item: the user lifts the 429 hold of its routes now. */
  release(keys: readonly string[]): void {
    for (const k of keys) this.d.flow.limiter.unpark(k);
    for (const k of keys) this.share((s, tx) => s.unpark(tx.sql, k));
    this.limitedUntil = null;
    this.d.wake();
  }

  /** Tells the other daemons of a 429 park or its release (shared rate limits only); a failure is logged, the local hold stands. */
  private share(change: (shared: SharedRateLimits, tx: Tx) => Promise<void>): void {
    const shared = this.d.flow.sharedLimits;
    if (!shared) return;
    this.d.write((tx) => change(shared, tx)).catch((err) => this.d.log.error({ err }, 'could not share a rate-limit hold with the other daemons'));
  }
}
