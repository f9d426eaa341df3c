/**
 * A circuit breaker per provider endpoint. After `failureThreshold` consecutive transient failures it
 * opens: no call starts, so no attempt is burned against a provider that is down. When the open period
 * ends it goes half-open and lets exactly one probe through; success closes it, failure reopens it for
 * twice as long (up to `maxOpenMs`).
 */

export interface BreakerPolicy {
  failureThreshold: number;
  openMs: number;
  maxOpenMs: number;
}

export const DEFAULT_BREAKER_POLICY: BreakerPolicy = { failureThreshold: 5, openMs: 30_000, maxOpenMs: 300_000 };

export type BreakerState = 'closed' | 'open' | 'half_open';

export interface BreakerSnapshot {
  state: BreakerState;
  consecutive_failures: number;
  open_until: string | null;
  times_opened: number;
}

export class CircuitBreaker {
  private state: BreakerState = 'closed';
  private failures = 0;
  private openUntil = 0;
  private currentOpenMs: number;
  private probeInFlight = false;
  private timesOpened = 0;

  constructor(private readonly policy: BreakerPolicy) {
    this.currentOpenMs = policy.openMs;
  }

  /** How many calls may start now, given `wanted`: all when closed, one probe when half-open, none when open. */
  admit(wanted: number, now: number): number {
    if (this.state === 'open' && now >= this.openUntil) this.state = 'half_open';
    if (this.state === 'closed') return wanted;
    if (this.state === 'half_open' && !this.probeInFlight && wanted > 0) {
      this.probeInFlight = true;
      return 1;
    }
    return 0;
  }

  /** Whether a call could start now (closed, or half-open with the probe free), without taking the probe. */
  canAdmit(now: number): boolean {
    if (this.state === 'open' && now >= this.openUntil) this.state = 'half_open';
    return this.state === 'closed' || (this.state === 'half_open' && !this.probeInFlight);
  }

  /** Whether the half-open probe is taken (by a call, or by a claim round whose transaction has not ended). */
  get probing(): boolean {
    return this.probeInFlight;
  }

  /** When an open breaker next lets a probe through (null unless open). */
  reopensAt(): number | null {
    return this.state === 'open' ? this.openUntil : null;
  }

  onSuccess(): void {
    this.state = 'closed';
    this.failures = 0;
    this.probeInFlight = false;
    this.currentOpenMs = this.policy.openMs;
  }

  /** A transient failure of the provider (429, 5xx, timeout, connection). Returns true if it opened the breaker. */
  onTransientFailure(now: number): boolean {
    this.failures++;
    if (this.state === 'half_open') {
      this.probeInFlight = false;
      this.currentOpenMs = Math.min(this.currentOpenMs * 2, this.policy.maxOpenMs);
      return this.open(now);
    }
    if (this.state === 'closed' && this.failures >= this.policy.failureThreshold) return this.open(now);
    return false;
  }

  /** A probe that ended without telling us about the provider (e.g. canceled) frees the half-open slot. */
  onInconclusive(): void {
    this.probeInFlight = false;
  }

  private open(now: number): boolean {
    this.state = 'open';
    this.openUntil = now + this.currentOpenMs;
    this.timesOpened++;
    return true;
  }

  snapshot(): BreakerSnapshot {
    return {
      state: this.state,
      consecutive_failures: this.failures,
      open_until: this.state === 'open' ? new Date(this.openUntil).toISOString() : null,
      times_opened: this.timesOpened,
    };
  }
}
