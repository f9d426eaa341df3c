import { describe, expect, it } from 'vitest';
import { backoffDelayMs, DEFAULT_RETRY_POLICY, parseRetryAfterMs } from '../../src/domain/retry.js';

const policy = { ...DEFAULT_RETRY_POLICY, baseMs: 1000, capMs: 60_000, jitter: 0.1 };
const middle = () => 0.5; // factor exactly 1
const lowest = () => 0; // factor 1 - jitter
const highest = () => 0.999999; // factor just under 1 + jitter

describe('backoff schedule', () => {
  it('doubles from the base and stops at the cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8].map((a) => backoffDelayMs(policy, a, middle))).toEqual([1000, 2000, 4000, 8000, 16_000, 32_000, 60_000, 60_000]);
  });

  it('keeps jitter within ±10% at every attempt', () => {
    for (let attempt = 1; attempt <= 10; attempt++) {
      const nominal = Math.min(1000 * 2 ** (attempt - 1), 60_000);
      expect(backoffDelayMs(policy, attempt, lowest)).toBe(Math.round(nominal * 0.9));
      expect(backoffDelayMs(policy, attempt, highest)).toBeLessThanOrEqual(Math.round(nominal * 1.1));
      expect(backoffDelayMs(policy, attempt, highest)).toBeGreaterThanOrEqual(Math.round(nominal * 1.099));
    }
  });

  it("uses the provider's Retry-After as a floor, never as a ceiling", () => {
    expect(backoffDelayMs(policy, 1, middle, 5000)).toBe(5000);
    expect(backoffDelayMs(policy, 5, middle, 5000)).toBe(16_000);
    expect(backoffDelayMs(policy, 1, lowest, 950)).toBe(950);
  });
});

describe('Retry-After parsing', () => {
  const now = Date.parse('2026-11-22T10:00:00Z');
  it('reads delta-seconds, HTTP dates and retry-after-ms', () => {
    expect(parseRetryAfterMs('3', null, now)).toBe(3000);
    expect(parseRetryAfterMs('1.5', null, now)).toBe(1500);
    expect(parseRetryAfterMs('Sun, 22 Nov 2026 10:00:07 GMT', null, now)).toBe(7000);
    expect(parseRetryAfterMs('3', '250', now)).toBe(250);
    expect(parseRetryAfterMs('Sun, 22 Nov 2026 09:00:00 GMT', null, now)).toBe(0);
  });
  it('ignores what it cannot read', () => {
    expect(parseRetryAfterMs(null, null, now)).toBeUndefined();
    expect(parseRetryAfterMs('soon', 'later', now)).toBeUndefined();
  });
});
