/** The per-model rate limiter under a fake clock: buckets, provider headers, 429 parks. */
import { describe, expect, it } from 'vitest';
import { parseResetDuration, RateLimiter, readRateLimitHeaders } from '../../src/domain/rate-limit.js';

const T0 = 1_000_000;

describe('rate limiter', () => {
  it('requests per minute: a burst up to the bucket, then one request per 60/rpm seconds', () => {
    const l = new RateLimiter(() => ({ requestsPerMinute: 3, tokensPerMinute: null }));
    for (let i = 0; i < 3; i++) expect(l.admit('m', 10, T0).ok).toBe(true);
    const refused = l.admit('m', 10, T0);
    expect(refused).toMatchObject({ ok: false, retryAt: T0 + 20_000, reason: 'requests per minute' });
    expect(l.admit('m', 10, T0 + 19_999).ok).toBe(false);
    expect(l.admit('m', 10, T0 + 20_000).ok).toBe(true);
  });

  it('tokens per minute: a call waits until its estimate has refilled', () => {
    const l = new RateLimiter(() => ({ requestsPerMinute: null, tokensPerMinute: 6000 }));
    expect(l.admit('m', 5000, T0).ok).toBe(true);
    expect(l.admit('m', 3000, T0)).toMatchObject({ ok: false, retryAt: T0 + 20_000 }); // needs 2000 more at 100/s
    expect(l.admit('m', 3000, T0 + 20_000).ok).toBe(true);
  });

  it('what a call that will not start took is given back, never above the bucket', () => {
    const l = new RateLimiter(() => ({ requestsPerMinute: 2, tokensPerMinute: 6000 }));
    expect(l.admit('m', 5000, T0).ok).toBe(true);
    expect(l.admit('m', 3000, T0).ok).toBe(false);
    l.giveBack('m', 5000, T0);
    expect(l.admit('m', 3000, T0).ok).toBe(true);
    expect(l.admit('m', 3000, T0).ok).toBe(true);
    // Both requests taken; three given back fill the bucket to its two, not three.
    for (let i = 0; i < 3; i++) l.giveBack('m', 3000, T0);
    expect(l.admit('m', 1, T0).ok).toBe(true);
    expect(l.admit('m', 1, T0).ok).toBe(true);
    expect(l.admit('m', 1, T0).ok).toBe(false);
  });

  it('a 429 parks the model for everyone until the reset; other models are unaffected', () => {
    const l = new RateLimiter(() => ({ requestsPerMinute: null, tokensPerMinute: null }));
    l.park('m', T0 + 2000, T0);
    expect(l.admit('m', 1, T0 + 1999)).toMatchObject({ ok: false, retryAt: T0 + 2000 });
    expect(l.admit('other', 1, T0 + 1).ok).toBe(true);
    expect(l.admit('m', 1, T0 + 2000).ok).toBe(true);
    expect(l.snapshot(T0)).toEqual({ m: { parked_until: new Date(T0 + 2000).toISOString() }, other: { parked_until: null } });
  });

  it('the provider’s remaining/reset headers correct the buckets: never more than the provider says remains', () => {
    const l = new RateLimiter(() => ({ requestsPerMinute: 1000, tokensPerMinute: null }));
    l.observe(
      'm',
      { 'x-ratelimit-remaining-requests': '1', 'x-ratelimit-reset-requests': '6s', 'x-ratelimit-remaining-tokens': '500', 'x-ratelimit-reset-tokens': '1m0s' },
      T0,
    );
    expect(l.admit('m', 400, T0).ok).toBe(true);
    expect(l.admit('m', 10, T0 + 1)).toMatchObject({ ok: false, retryAt: T0 + 6000, reason: 'provider requests remaining' });
    expect(l.admit('m', 200, T0 + 6000)).toMatchObject({ ok: false, retryAt: T0 + 60_000, reason: 'provider tokens remaining' });
    expect(l.admit('m', 200, T0 + 60_000).ok).toBe(true);
  });

  it('reads OpenAI-style reset durations', () => {
    expect(parseResetDuration('6ms')).toBe(6);
    expect(parseResetDuration('1s')).toBe(1000);
    expect(parseResetDuration('0.5s')).toBe(500);
    expect(parseResetDuration('6m0s')).toBe(360_000);
    expect(parseResetDuration('1h2m3.5s')).toBe(3_723_500);
    expect(parseResetDuration('20')).toBe(20_000);
    expect(parseResetDuration('soon')).toBeNull();
    expect(readRateLimitHeaders({ 'x-ratelimit-remaining-requests': 'x' }).remainingRequests).toBeNull();
  });
});
