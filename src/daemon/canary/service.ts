/**
 * Runs the canary (canary-operation.ts) every `canary.interval` (0: off; the first one interval after
 * start) and keeps what health reports: when the last one succeeded, how long it took from submit to
 * applied, and whether one is late — still unfinished `canary.timeout` after it was submitted, which
 * turns health unready. A canary submitted while the previous one has not started supersedes it; one
 * whose call is under way is waited for.
 *
 * Times come from the injected clock; the timer only decides when to look (tests call `tick`).
 */
import { isTerminalThread } from '../../domain/states.js';
import type { Clock } from '../../core/clock.js';
import type { EngineEvent } from '../engine/events.js';
import type { Logger } from '../../core/logger.js';

export interface CanaryOptions {
  intervalMs: number;
  timeoutMs: number;
  clock: Clock;
  logger: Logger;
  /** Submits a canary request; resolves with its thread (a new one, or the one already running). */
  submit(): Promise<{ thread_id: string }>;
  /** Follows engine events (the canary's thread ending). */
  subscribe(listener: (e: EngineEvent) => void): () => void;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export class CanaryService {
  lastSuccessAt: number | null = null;
  lastLatencyMs: number | null = null;
  private lastFailure: { at: number; reason: string } | null = null;
  /** The canary being waited for (`threadId` null once it was canceled: the next one takes its place). */
  private pending: { threadId: string | null; since: number } | null = null;
  private lastStartAt: number;
  private timer: NodeJS.Timeout | null = null;
  private unsubscribe: (() => void) | null = null;
  private starting = false;

  constructor(private readonly o: CanaryOptions) {
    this.lastStartAt = o.clock.now();
  }

  get enabled(): boolean {
    return this.o.intervalMs > 0;
  }

  start(): void {
    if (!this.enabled) return;
    this.lastStartAt = this.o.clock.now();
    this.unsubscribe = this.o.subscribe((e) => this.observe(e));
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.min(this.o.intervalMs, this.o.timeoutMs, 1000)));
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.unsubscribe?.();
  }

  /** Starts a canary when one is due. */
  async tick(): Promise<void> {
    const now = this.o.clock.now();
    if (!this.enabled || this.starting || now - this.lastStartAt < this.o.intervalMs) return;
    this.lastStartAt = now;
    this.starting = true;
    try {
      const { thread_id } = await this.o.submit();
      // Lateness counts from the first canary not yet answered: one that replaces (supersedes) an
      // unstarted one, or follows one that failed to finish, inherits its start.
      this.pending = { threadId: thread_id, since: this.pending?.since ?? now };
    } catch (err) {
      this.fail(now, `could not be submitted: ${(err as Error).message}`);
    } finally {
      this.starting = false;
    }
  }

  private observe(e: EngineEvent): void {
    if (e.type !== 'thread' || !this.pending || !isTerminalThread(e.status)) return;
    const now = this.o.clock.now();
    if (e.thread_id === this.pending.threadId) {
      if (e.status === 'complete') {
        this.lastSuccessAt = now;
        this.lastLatencyMs = now - this.pending.since;
        this.lastFailure = null;
        this.pending = null;
      } else if (e.status === 'failed') {
        this.fail(now, `thread ${e.thread_id} failed`);
        this.pending = null;
      } else this.pending.threadId = null; // canceled (superseded by the next canary, or by hand)
    }
  }

  private fail(at: number, reason: string): void {
    this.lastFailure = { at, reason };
    this.o.logger.error({ component: 'canary', reason }, `canary failed: ${reason}`);
  }

  /** Still unfinished `timeout` after it was submitted. */
  private late(now: number): boolean {
    return this.pending !== null && now - this.pending.since > this.o.timeoutMs;
  }

  /** Health's readiness check: no canary late, and the last one did not fail. */
  get ok(): boolean {
    return !this.enabled || (!this.late(this.o.clock.now()) && this.lastFailure === null);
  }

  snapshot() {
    const now = this.o.clock.now();
    return {
      enabled: this.enabled,
      interval_ms: this.o.intervalMs,
      timeout_ms: this.o.timeoutMs,
      ok: this.ok,
      last_success_at: iso(this.lastSuccessAt),
      last_latency_ms: this.lastLatencyMs,
      pending: this.pending ? { thread_id: this.pending.threadId, since: iso(this.pending.since), late: this.late(now) } : null,
      last_failure: this.lastFailure ? { at: iso(this.lastFailure.at), reason: this.lastFailure.reason } : null,
    };
  }
}
export type CanarySnapshot = ReturnType<CanaryService['snapshot']>;
