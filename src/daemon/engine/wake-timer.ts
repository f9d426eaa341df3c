/**
 * The engine's one sleep: it wakes the engine at the earliest time something may be claimable again (the
 * next due item, a deadline, a breaker's probe, a rate limit's end). One timer at a time: a new time replaces
 * the one set before. Once stopped, it never fires again and later times are ignored.
 */
import type { Clock } from '../../core/clock.js';

/**
 * The longest sleep: a parked item's far-future time must not overflow setTimeout (it would fire at once),
 * and a long sleep re-checks now and then anyway.
 */
const MAX_SLEEP_MS = 3_600_000;

export class WakeTimer {
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly wake: () => void,
  ) {}

  /** Wakes the engine at `at` (at once when it has passed), instead of any time set before. */
  at(at: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(
      () => {
        this.timer = null;
        this.wake();
      },
      Math.min(MAX_SLEEP_MS, Math.max(0, at - this.clock.now())),
    );
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
