/** Retry policy: capped exponential backoff with ±jitter, floored by the provider's Retry-After. */

export interface RetryPolicy {
  /** Delay before the 2nd attempt; doubles each attempt. */
  baseMs: number;
  capMs: number;
  /** Relative jitter, e.g. 0.1 for ±10%. */
  jitter: number;
  maxAttempts: number;
  /** New calls allowed for an answer that failed the schema, counted apart from attempts. */
  repairAttempts: number;
  /**
   * A call in flight when the daemon stopped or crashed may have been paid: `retry` sends it again
   * (at-least-once), `hold` does not (at-most-once) and leaves the decision to the user.
   */
  interrupted: 'retry' | 'hold';
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  baseMs: 1_000,
  capMs: 60_000,
  jitter: 0.1,
  maxAttempts: 3,
  repairAttempts: 0,
  interrupted: 'retry',
};

/**
 * The delay before the next attempt after `attempt` failed: `min(base·2^(attempt−1), cap)` scaled by a
 * uniform factor in [1−jitter, 1+jitter], and never less than `retryAfterMs` when the provider sent one.
 * `random` returns a number in [0, 1) and is injected so tests can pin it.
 */
export function backoffDelayMs(policy: RetryPolicy, attempt: number, random: () => number, retryAfterMs?: number): number {
  const exponential = Math.min(policy.baseMs * 2 ** Math.max(0, attempt - 1), policy.capMs);
  const factor = 1 + policy.jitter * (2 * random() - 1);
  const jittered = Math.round(exponential * factor);
  return retryAfterMs !== undefined ? Math.max(jittered, Math.ceil(retryAfterMs)) : jittered;
}

/**
 * Parses `Retry-After` (delta-seconds or an HTTP date) and `retry-after-ms` into milliseconds.
 * `retry-after-ms` wins when both are present (it is the more precise of the two).
 */
export function parseRetryAfterMs(retryAfter: string | null | undefined, retryAfterMsHeader: string | null | undefined, now: number): number | undefined {
  if (retryAfterMsHeader) {
    const ms = Number(retryAfterMsHeader);
    if (Number.isFinite(ms) && ms >= 0) return ms;
  }
  if (!retryAfter) return undefined;
  const trimmed = retryAfter.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Number(trimmed) * 1000;
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, date - now);
}
