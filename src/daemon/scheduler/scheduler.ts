/**
 * The scheduler: on each tick, every active schedule whose period is due gets a run row claimed by a
 * cheap INSERT (lease-then-LLM, spec 004) before any work or payment; only the claimer that inserted
 * the row starts the period's thread. A loser — another daemon on the same database, or a second tick
 * — inserts nothing and does nothing more: no thread, no provider call, no usage. Stale `pending` rows
 * are re-claimed by rewriting their stamp. Runs are finalized when their thread ends (finalize.ts).
 *
 * Time comes from the injected clock, so the tick is testable with a fake one. Wake-ups are timers set
 * to the next fire time or the next stale stamp, never a fixed poll.
 */
import type { Sql } from '../../core/sql.js';
import type { ScheduleRunRow } from '../../db/schema-schedules.js';
import {
  claimSchedulePeriod,
  failUnstartedScheduleRun,
  getScheduleRunForPeriod,
  listActiveSchedules,
  oldestPendingClaim,
  reclaimStaleScheduleRuns,
} from '../../db/schedules.js';
import type { OperationRegistry } from '../../operations/registry.js';
import { duePeriod, nextFireAt, periodKey } from '../../domain/schedule.js';
import type { Tx, Write } from '../engine/tx.js';
import type { CrashAt } from '../../core/crash.js';
import { startScheduledRun, type StartOutcome } from './start-run.js';
import { StaleStateError, CommandError } from '../../core/errors.js';
import { newId } from '../../core/ids.js';
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/logger.js';

/** Longest sleep between ticks: bounds the effect of a wall-clock jump or a suspended machine. */
const MAX_SLEEP_MS = 60_000;

export interface SchedulerOptions {
  /** Reads outside a write (due periods, next fire times): the last commit. */
  reader: Sql;
  /** Every write: one writer transaction, `now` from this scheduler's clock. */
  write: Write;
  clock: Clock;
  logger: Logger;
  /** The claim stamp's owner: unique per process. */
  owner: string;
  staleAfterMs: number;
  misfireGraceMs: number;
  operations: OperationRegistry;
  /** engine.max_queued: a run that would overfill the queue fails (QUEUE_FULL) instead of queueing. */
  maxQueued: number;
  /** Called when runs started threads, so the engine claims their work at once. */
  onWorkQueued(): void;
  /** Crash tests' hook (`after_schedule_claim`); a no-op in the shipped bundle. */
  crashAt: CrashAt;
}

export interface TickResult {
  /** Periods this tick claimed with its INSERT. */
  claimed: ScheduleRunRow[];
  /** Due periods that already had a run row (another claimer won, or they already ran): skipped. */
  lost: number;
  /** Of those, the ones lost at the INSERT itself (another claimer committed first in the same instant). */
  lostAtInsert: number;
  /** Stale pending runs this tick took over. */
  reclaimed: ScheduleRunRow[];
  outcomes: Record<StartOutcome | 'failed', number>;
}

export class Scheduler {
  private chain: Promise<unknown> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(private readonly o: SchedulerOptions) {}

  /** Ticks once now (runs due while no daemon ran are caught up here), then on every due time. */
  start(): Promise<TickResult> {
    return this.tick();
  }

  /** No new ticks; resolves when the tick in progress (if any) has finished. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.chain;
  }

  /** A schedule changed: tick now so the timer follows. */
  wake(): void {
    void this.tick().catch(() => undefined);
  }

  /** Runs one tick; ticks of this process run one after another. */
  tick(): Promise<TickResult> {
    const run = this.chain.then(() => this.tickOnce());
    this.chain = run.catch(() => undefined);
    return run;
  }

  private write<T>(fn: (tx: Tx) => T): Promise<T> {
    return this.o.write(fn);
  }

  private async tickOnce(): Promise<TickResult> {
    const result: TickResult = {
      claimed: [],
      lost: 0,
      lostAtInsert: 0,
      reclaimed: [],
      outcomes: { started: 0, in_progress: 0, finalized: 0, lost: 0, failed: 0 },
    };
    if (this.stopped) return result;
    try {
      const now = this.o.clock.now();
      const { due, alreadyClaimed } = await this.duePeriods(now);
      result.lost = alreadyClaimed;
      if (due.length > 0) {
        // Step 1, the claim: one INSERT per due period; the UNIQUE index picks the single winner.
        result.claimed = await this.write(async (tx) => {
          const claimed: ScheduleRunRow[] = [];
          for (const d of due) {
            const run = await claimSchedulePeriod(tx.sql, { id: newId(tx.now), ...d, owner: this.o.owner, now: tx.now });
            if (run) claimed.push(run);
          }
          return claimed;
        });
        result.lostAtInsert = due.length - result.claimed.length;
        result.lost += result.lostAtInsert;
        if (result.claimed.length > 0) this.o.crashAt('after_schedule_claim');
      }
      result.reclaimed = await this.write((tx) =>
        reclaimStaleScheduleRuns(tx.sql, { owner: this.o.owner, now: tx.now, stale_before: tx.now - this.o.staleAfterMs }),
      );
      for (const r of result.reclaimed) {
        this.o.logger.warn({ run_id: r.id, schedule_id: r.schedule_id, period_key: r.period_key, claims: r.claims }, 're-claimed a stale pending schedule run');
      }
      const outcomes = await Promise.all([...result.claimed, ...result.reclaimed].map((r) => this.startRun(r)));
      for (const o of outcomes) result.outcomes[o]++;
      if (result.outcomes.started > 0) this.o.onWorkQueued();
    } catch (err) {
      this.o.logger.error({ err }, 'schedule tick failed; the next tick retries');
    } finally {
      await this.scheduleNextTick();
    }
    return result;
  }

  /** Due periods without a run row yet. The read only saves a write; the INSERT still decides. */
  private async duePeriods(now: number): Promise<{ due: { schedule_id: string; period_key: string; period_at: number }[]; alreadyClaimed: number }> {
    const due = [];
    let alreadyClaimed = 0;
    for (const s of await listActiveSchedules(this.o.reader)) {
      let at: number | null;
      try {
        at = duePeriod(s, now, this.o.misfireGraceMs);
      } catch (err) {
        this.o.logger.error({ err, schedule_id: s.id }, 'cannot evaluate the schedule; skipping it');
        continue;
      }
      if (at === null) continue;
      const key = periodKey(at);
      if (await getScheduleRunForPeriod(this.o.reader, s.id, key)) {
        alreadyClaimed++;
        continue;
      }
      due.push({ schedule_id: s.id, period_key: key, period_at: at });
    }
    return { due, alreadyClaimed };
  }

  /** Step 2 for one held lease; a run whose operation cannot start is recorded failed, not retried forever. */
  private async startRun(run: ScheduleRunRow): Promise<StartOutcome | 'failed'> {
    try {
      const outcome = await this.write((tx) => startScheduledRun(tx, this.o, run));
      if (outcome === 'started') this.o.logger.info({ run_id: run.id, schedule_id: run.schedule_id, period_key: run.period_key }, 'schedule run started');
      return outcome;
    } catch (err) {
      if (err instanceof StaleStateError) return 'lost';
      if (!(err instanceof CommandError)) {
        // Left pending: the recovery clause retries it after the stale window.
        this.o.logger.error({ err, run_id: run.id }, 'cannot start the schedule run; it stays pending');
        return 'failed';
      }
      this.o.logger.warn({ run_id: run.id, schedule_id: run.schedule_id, error: err.message }, 'schedule run failed to start');
      await this.write((tx) =>
        failUnstartedScheduleRun(tx.sql, { id: run.id, owner: run.claim_owner, claimed_at: run.claimed_at, now: tx.now, error_message: err.message }),
      ).catch((e) => this.o.logger.error({ err: e, run_id: run.id }, 'cannot record the failed schedule run'));
      return 'failed';
    }
  }

  /** Sleeps until the next fire time of any active schedule or the next stale stamp, at most a minute. */
  private async scheduleNextTick(): Promise<void> {
    if (this.stopped) return;
    const now = this.o.clock.now();
    const candidates: number[] = [now + MAX_SLEEP_MS];
    try {
      for (const s of await listActiveSchedules(this.o.reader)) {
        const next = nextFireAt(s, now);
        if (next !== null) candidates.push(next);
      }
      const oldest = await oldestPendingClaim(this.o.reader);
      // The recovery clause takes stamps strictly older than the window.
      if (oldest !== null) candidates.push(oldest + this.o.staleAfterMs + 1);
    } catch (err) {
      this.o.logger.error({ err }, 'cannot compute the next schedule tick');
    }
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), Math.max(0, Math.min(...candidates) - now));
    this.timer.unref();
  }
}
