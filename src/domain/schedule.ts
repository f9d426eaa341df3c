/**
 * Schedules, pure: reading a cron expression in a time zone, deciding which period a tick may claim,
 * and the state tables of schedules and their runs. Time is always a parameter.
 *
 * A period is identified by its fire time (ISO 8601, UTC): the natural key of a run.
 */
import { Cron } from 'croner';

export const CATCH_UP_POLICIES = ['latest', 'skip'] as const;

export const SCHEDULE_STATUSES = ['active', 'paused', 'removed'] as const;
export type ScheduleStatus = (typeof SCHEDULE_STATUSES)[number];

export const SCHEDULE_TRANSITIONS: Record<ScheduleStatus, readonly ScheduleStatus[]> = {
  active: ['paused', 'removed'],
  paused: ['active', 'removed'],
  removed: [],
};

export const RUN_STATUSES = ['pending', 'complete', 'failed', 'canceled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/**
 * pending → pending is the stale re-claim (a new stamp). failed → complete: the run's thread failed,
 * a person ran `combine retry`, and it completed.
 */
export const RUN_TRANSITIONS: Record<RunStatus, readonly RunStatus[]> = {
  pending: ['pending', 'complete', 'failed', 'canceled'],
  failed: ['complete'],
  complete: [],
  canceled: [],
};

export function canTransitionSchedule(from: ScheduleStatus, to: ScheduleStatus): boolean {
  return SCHEDULE_TRANSITIONS[from]?.includes(to) ?? false;
}

/** The run statuses a run may reach `to` from. */
export function runStatusesLeadingTo(to: RunStatus): RunStatus[] {
  return RUN_STATUSES.filter((from) => RUN_TRANSITIONS[from].includes(to) && from !== to);
}

export type CronCheck = { ok: true } | { ok: false; error: string };

/** Whether `tz` is an IANA time zone this runtime knows. */
export function isValidTimeZone(tz: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

/** Five fields (minute precision), or six with seconds first. */
function cronOf(expr: string, timezone: string): Cron {
  return new Cron(expr, { timezone, mode: '5-or-6-parts' });
}

/** Validates an expression and time zone; the error says what is wrong in the user's terms. */
export function checkCron(expr: string, timezone: string): CronCheck {
  if (!isValidTimeZone(timezone)) return { ok: false, error: `"${timezone}" is not an IANA time zone (e.g. Europe/Berlin, UTC)` };
  try {
    const cron = cronOf(expr, timezone);
    if (cron.nextRun(new Date()) === null) return { ok: false, error: `"${expr}" never fires` };
    return { ok: true };
  } catch (err) {
    return { ok: false, error: `"${expr}" is not a cron expression: ${(err as Error).message.replace(/^CronPattern: /, '')}` };
  }
}

export interface ScheduleTiming {
  cron: string;
  timezone: string;
  catch_up: string;
  active_from: number;
}

/** The period key of a fire time. */
export function periodKey(at: number): string {
  return new Date(at).toISOString();
}

/** The calendar date (YYYY-MM-DD) of an instant in a time zone: a briefing's date. */
export function localDate(at: number, timezone: string): string {
  // en-CA formats dates as YYYY-MM-DD.
  return new Intl.DateTimeFormat('en-CA', { timeZone: timezone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date(at));
}

/**
 * The period a tick at `now` may claim, or null. It is the latest fire time at or before `now` and not
 * before `active_from`. Periods missed while no daemon ran collapse into that one (`latest`); with
 * `skip` it is claimed only if it fired within `graceMs` (the tick is on time, not catching up).
 */
export function duePeriod(s: ScheduleTiming, now: number, graceMs: number): number | null {
  // previousRuns excludes a run at exactly the reference instant; a tick at the fire time must see it.
  const last = cronOf(s.cron, s.timezone).previousRuns(1, new Date(now + 1))[0];
  if (!last) return null;
  const at = last.getTime();
  if (at > now || at < s.active_from) return null;
  if (s.catch_up === 'skip' && now - at > graceMs) return null;
  return at;
}

/** The first fire time after `now`, or null if the expression never fires again. */
export function nextFireAt(s: Pick<ScheduleTiming, 'cron' | 'timezone'>, now: number): number | null {
  return cronOf(s.cron, s.timezone).nextRun(new Date(now))?.getTime() ?? null;
}

/** The next `n` fire times after `now` (for `schedule add` to show what it will do). */
export function nextFireTimes(s: Pick<ScheduleTiming, 'cron' | 'timezone'>, now: number, n: number): number[] {
  return cronOf(s.cron, s.timezone)
    .nextRuns(n, new Date(now))
    .map((d) => d.getTime());
}

/** Dates are calendar days, YYYY-MM-DD, and must exist (no 2026-02-30). */
export function isCalendarDate(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s)) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}
