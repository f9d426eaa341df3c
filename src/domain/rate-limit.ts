/**
 * The per-model rate limiter, pure (time is a parameter). Per model:
 *
 * - a requests-per-minute and a tokens-per-minute token bucket (configured; absent = unlimited),
 * - the provider's own view of its window from `x-ratelimit-remaining-*` / `x-ratelimit-reset-*`
 *   headers, which corrects the buckets: we never send more than the provider says remains,
 * - a park: after a 429 the model takes no new calls until the reset, for every queued item of that
 *   model, not only the one that got the 429.
 *
 * It lives in memory: after a restart the buckets start full and the first answers' headers correct them.
 */

export interface ModelRateLimits {
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
}

/**
 * A classic token bucket refilled continuously: `capacity` per minute. Full when made, or at `level` as
 * of `now` (a bucket kept elsewhere: the shared rate-limit row of several daemons).
 */
export class TokenBucket {
  private level: number;
  private updatedAt: number;

  constructor(
    readonly capacity: number,
    now: number,
    level: number = capacity,
  ) {
    this.level = level;
    this.updatedAt = now;
  }

  private refill(now: number): void {
    if (now > this.updatedAt) {
      this.level = Math.min(this.capacity, this.level + ((now - this.updatedAt) * this.capacity) / 60_000);
      this.updatedAt = now;
    }
  }

  /** When `n` will be available (now if it is); `n` above capacity is treated as capacity. */
  readyAt(n: number, now: number): number {
    this.refill(now);
    const need = Math.min(n, this.capacity) - this.level;
    return need <= 0 ? now : now + Math.ceil((need * 60_000) / this.capacity);
  }

  take(n: number, now: number): void {
    this.refill(now);
    this.level -= Math.min(n, this.capacity);
  }

  /** Puts back `n` taken for a call that will not start (up to capacity). */
  giveBack(n: number, now: number): void {
    this.refill(now);
    this.level = Math.min(this.capacity, this.level + Math.min(n, this.capacity));
  }

  /** Lowers the level to what the provider says remains (never raises it). */
  clampTo(remaining: number, now: number): void {
    this.refill(now);
    this.level = Math.min(this.level, remaining);
  }

  available(now: number): number {
    this.refill(now);
    return this.level;
  }
}

/** The provider's window as its headers describe it: `remaining` until `resetAt`. */
interface ProviderWindow {
  remaining: number;
  resetAt: number;
}

export type Admission = { ok: true } | { ok: false; retryAt: number; reason: string };

class ModelLimiter {
  private readonly requests: TokenBucket | null;
  private readonly tokens: TokenBucket | null;
  private requestWindow: ProviderWindow | null = null;
  private tokenWindow: ProviderWindow | null = null;
  parkedUntil = 0;

  constructor(limits: ModelRateLimits, now: number) {
    this.requests = limits.requestsPerMinute ? new TokenBucket(limits.requestsPerMinute, now) : null;
    this.tokens = limits.tokensPerMinute ? new TokenBucket(limits.tokensPerMinute, now) : null;
  }

  admit(tokens: number, now: number): Admission {
    if (now < this.parkedUntil) return { ok: false, retryAt: this.parkedUntil, reason: 'rate limited by the provider (429)' };
    const waits: { at: number; reason: string }[] = [];
    if (this.requests) waits.push({ at: this.requests.readyAt(1, now), reason: 'requests per minute' });
    if (this.tokens) waits.push({ at: this.tokens.readyAt(tokens, now), reason: 'tokens per minute' });
    for (const [w, need, what] of [
      [this.requestWindow, 1, 'provider requests remaining'],
      [this.tokenWindow, tokens, 'provider tokens remaining'],
    ] as const) {
      if (w && now < w.resetAt && w.remaining < need) waits.push({ at: w.resetAt, reason: what });
    }
    const blocking = waits.filter((w) => w.at > now).sort((a, b) => b.at - a.at)[0];
    if (blocking) return { ok: false, retryAt: blocking.at, reason: blocking.reason };
    this.requests?.take(1, now);
    this.tokens?.take(tokens, now);
    if (this.requestWindow && now < this.requestWindow.resetAt) this.requestWindow.remaining -= 1;
    if (this.tokenWindow && now < this.tokenWindow.resetAt) this.tokenWindow.remaining -= tokens;
    return { ok: true };
  }

  /**
   * What `admit` took from the buckets for a call that will not start, put back. Not the provider's
   * windows: an answer may have replaced the window the admission counted against meanwhile, and adding
   * to the new one would let more calls through than the provider says remain.
   */
  giveBack(tokens: number, now: number): void {
    this.requests?.giveBack(1, now);
    this.tokens?.giveBack(tokens, now);
  }

  observe(h: RateLimitHeaders, now: number): void {
    if (h.remainingRequests !== null) {
      this.requests?.clampTo(h.remainingRequests, now);
      this.requestWindow = { remaining: h.remainingRequests, resetAt: now + (h.resetRequestsMs ?? 60_000) };
    }
    if (h.remainingTokens !== null) {
      this.tokens?.clampTo(h.remainingTokens, now);
      this.tokenWindow = { remaining: h.remainingTokens, resetAt: now + (h.resetTokensMs ?? 60_000) };
    }
  }
}

export interface RateLimitHeaders {
  remainingRequests: number | null;
  remainingTokens: number | null;
  resetRequestsMs: number | null;
  resetTokensMs: number | null;
}

/**
 * Reads OpenAI-style reset durations: "6ms", "1s", "0.5s", "6m0s", "1h2m3.5s"; a bare number is seconds.
 * Returns null for anything else.
 */
export function parseResetDuration(value: string | null | undefined): number | null {
  if (value === null || value === undefined) return null;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/g;
  const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
  let total = 0;
  let consumed = 0;
  for (const m of v.matchAll(re)) {
    total += Number(m[1]) * units[m[2]!]!;
    consumed += m[0].length;
  }
  return consumed === v.length && consumed > 0 ? Math.round(total) : null;
}

/** A header's non-negative number, or null (absent or not one). */
function headerCount(raw: string | undefined): number | null {
  const n = raw === undefined ? NaN : Number(raw);
  return Number.isFinite(n) && n >= 0 ? n : null;
}

/** Picks the `x-ratelimit-*` headers out of a header map (names lower-case). */
export function readRateLimitHeaders(headers: Readonly<Record<string, string>>): RateLimitHeaders {
  return {
    remainingRequests: headerCount(headers['x-ratelimit-remaining-requests']),
    remainingTokens: headerCount(headers['x-ratelimit-remaining-tokens']),
    resetRequestsMs: parseResetDuration(headers['x-ratelimit-reset-requests']),
    resetTokensMs: parseResetDuration(headers['x-ratelimit-reset-tokens']),
  };
}

/** All models' limiters. `limitsFor` gives a model's configured buckets. */
export class RateLimiter {
  private readonly models = new Map<string, ModelLimiter>();

  constructor(private readonly limitsFor: (model: string) => ModelRateLimits) {}

  private model(model: string, now: number): ModelLimiter {
    let m = this.models.get(model);
    if (!m) {
      m = new ModelLimiter(this.limitsFor(model), now);
      this.models.set(model, m);
    }
    return m;
  }

  /** Takes one request and `tokens` from the model's buckets if all allow it now; else says until when not. */
  admit(model: string, tokens: number, now: number): Admission {
    return this.model(model, now).admit(tokens, now);
  }

  /** Puts back what `admit` took for a call that will not start (its claim was lost or did not commit). */
  giveBack(model: string, tokens: number, now: number): void {
    this.models.get(model)?.giveBack(tokens, now);
  }

  /** Corrects the model's buckets from an answer's rate-limit headers. */
  observe(model: string, headers: Readonly<Record<string, string>>, now: number): void {
    this.model(model, now).observe(readRateLimitHeaders(headers), now);
  }

  /** A 429: no new call of this model starts before `until`. */
  park(model: string, until: number, now: number): void {
    const m = this.model(model, now);
    m.parkedUntil = Math.max(m.parkedUntil, until);
  }

  /** When the model's 429 hold ends, or null when it is not held. */
  parkedUntil(model: string, now: number): number | null {
    const until = this.models.get(model)?.parkedUntil ?? 0;
    return until > now ? until : null;
  }

  /** Lifts a model's 429 hold (a user's `combine retry`). */
  unpark(model: string): void {
    const m = this.models.get(model);
    if (m) m.parkedUntil = 0;
  }

  /** For health and `config show`: per model, when it is parked until (if it is). */
  snapshot(now: number): Record<string, { parked_until: string | null }> {
    const out: Record<string, { parked_until: string | null }> = {};
    for (const [name, m] of this.models) out[name] = { parked_until: m.parkedUntil > now ? new Date(m.parkedUntil).toISOString() : null };
    return out;
  }
}
