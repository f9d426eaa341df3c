/**
 * schedules and schedule_runs. A run row is the lease of lease-then-LLM (spec 004): it is INSERTed as
 * `pending` before any work, its UNIQUE (schedule_id, period_key) decides the one claimer of a period,
 * a stale `pending` row is re-claimed by rewriting its stamp, and it is finalized by an UPDATE.
 */
import { runStatusesLeadingTo, SCHEDULE_TRANSITIONS, type RunStatus, type ScheduleStatus } from '../domain/schedule.js';
import type { Db } from './connection.js';
import type { ScheduleRow, ScheduleRunRow } from './schema-schedules.js';
import { expectOneChange, prepared } from './statements.js';
import { IllegalTransitionError, StaleStateError } from '../core/errors.js';

export function insertSchedule(db: Db, row: ScheduleRow): void {
  prepared(
    db,
    `INSERT INTO schedules (id, project_id, operation, input, cron, timezone, catch_up, status, active_from, created_at, updated_at)
     VALUES (@id, @project_id, @operation, @input, @cron, @timezone, @catch_up, @status, @active_from, @created_at, @updated_at)`,
  ).run(row);
}

export function getSchedule(db: Db, id: string): ScheduleRow | undefined {
  return prepared(db, 'SELECT * FROM schedules WHERE id = ?').get(id) as ScheduleRow | undefined;
}

/** Schedules a person sees: not removed (unless asked), oldest first. */
export function listSchedules(db: Db, includeRemoved: boolean): ScheduleRow[] {
  return prepared(db, "SELECT * FROM schedules WHERE status <> 'removed' OR @includeRemoved ORDER BY created_at, id").all({
    includeRemoved: includeRemoved ? 1 : 0,
  }) as ScheduleRow[];
}

/** The schedules a tick looks at. */
export function listActiveSchedules(db: Db): ScheduleRow[] {
  return prepared(db, "SELECT * FROM schedules WHERE status = 'active'").all() as ScheduleRow[];
}

/**
 * Moves a schedule between statuses (pause, resume, remove); a resume also moves `active_from` to now
 * so that periods that passed while paused are not caught up.
 */
export function transitionSchedule(db: Db, p: { id: string; from: ScheduleStatus; to: ScheduleStatus; now: number }): void {
  if (!SCHEDULE_TRANSITIONS[p.from].includes(p.to)) throw new IllegalTransitionError('schedule', p.from, p.to);
  const result = prepared(
    db,
    `UPDATE schedules
     SET status = @to, updated_at = @now,
         active_from = CASE WHEN @to = 'active' THEN @now ELSE active_from END
     WHERE id = @id AND status = @from`,
  ).run(p);
  expectOneChange(result, `schedule ${p.id} is not ${p.from}`);
}

export function getScheduleRunForPeriod(db: Db, scheduleId: string, periodKey: string): ScheduleRunRow | undefined {
  return prepared(db, 'SELECT * FROM schedule_runs WHERE schedule_id = ? AND period_key = ?').get(scheduleId, periodKey) as ScheduleRunRow | undefined;
}

export function getScheduleRun(db: Db, id: string): ScheduleRunRow | undefined {
  return prepared(db, 'SELECT * FROM schedule_runs WHERE id = ?').get(id) as ScheduleRunRow | undefined;
}

/**
 * Step 1 of lease-then-LLM: the claim. Returns the new `pending` row, or undefined when the period
 * already has a row — another claimer won it (or it already ran), and the caller must do nothing.
 */
export function claimSchedulePeriod(
  db: Db,
  p: { id: string; schedule_id: string; period_key: string; period_at: number; owner: string; now: number },
): ScheduleRunRow | undefined {
  return prepared(
    db,
    `INSERT INTO schedule_runs (id, schedule_id, period_key, period_at, status, claim_owner, claimed_at, claims, created_at)
     VALUES (@id, @schedule_id, @period_key, @period_at, 'pending', @owner, @now, 1, @now)
     ON CONFLICT (schedule_id, period_key) DO NOTHING
     RETURNING *`,
  ).get(p) as ScheduleRunRow | undefined;
}

/**
 * The recovery clause: takes over `pending` rows whose stamp is older than `stale_before` by writing a
 * new stamp, never by a second INSERT. Of two claimers racing here the second sees a fresh stamp and
 * gets nothing back.
 */
export function reclaimStaleScheduleRuns(db: Db, p: { owner: string; now: number; stale_before: number }): ScheduleRunRow[] {
  return prepared(
    db,
    `UPDATE schedule_runs INDEXED BY idx_schedule_runs_pending
     SET claim_owner = @owner, claimed_at = @now, claims = claims + 1
     WHERE status = 'pending' AND claimed_at < @stale_before
     RETURNING *`,
  ).all(p) as ScheduleRunRow[];
}

/** The oldest lease stamp among pending runs: when the next re-claim can become due. */
export function oldestPendingClaim(db: Db): number | null {
  const row = prepared(db, "SELECT min(claimed_at) AS t FROM schedule_runs INDEXED BY idx_schedule_runs_pending WHERE status = 'pending'").get() as {
    t: number | null;
  };
  return row.t;
}

/**
 * Records the thread that does a claimed run's work. Guarded by the stamp: a claimer whose lease was
 * re-claimed by someone else (it stalled past the stale window) changes nothing and is told so.
 */
export function linkScheduleRunThread(db: Db, p: { id: string; owner: string; claimed_at: number; thread_id: string }): void {
  const result = prepared(
    db,
    `UPDATE schedule_runs SET thread_id = @thread_id
     WHERE id = @id AND status = 'pending' AND claim_owner = @owner AND claimed_at = @claimed_at AND thread_id IS NULL`,
  ).run(p);
  expectOneChange(result, `schedule run ${p.id} is no longer leased by ${p.owner} at ${p.claimed_at}`);
}

/**
 * Step 3 of lease-then-LLM: finalizes the run done by `thread_id` and records its usage — the token
 * counts of every `response` in the ledger of the thread and of its children — in the same UPDATE,
 * so usage is written exactly when the status leaves `pending`, once. Returns the finalized runs: most
 * threads belong to none; two schedules asking for the same work at once share one thread.
 */
export function finalizeScheduleRunOfThread(
  db: Db,
  p: { thread_id: string; to: Exclude<RunStatus, 'pending'>; now: number; error_message: string | null },
): ScheduleRunRow[] {
  const from = runStatusesLeadingTo(p.to);
  if (from.length === 0) throw new StaleStateError(`no run status leads to ${p.to}`);
  const sql = `
    WITH usage AS (
      SELECT count(*) AS responses,
             coalesce(sum(json_extract(payload, '$.usage.prompt_tokens')), 0) AS prompt_tokens,
             coalesce(sum(json_extract(payload, '$.usage.completion_tokens')), 0) AS completion_tokens,
             coalesce(sum(json_extract(payload, '$.usage.total_tokens')), 0) AS total_tokens
      FROM llm_ledger_entries
      WHERE entry_type = 'response'
        AND (thread_id = @thread_id OR thread_id IN (SELECT id FROM llm_threads WHERE parent_thread_id = @thread_id)))
    UPDATE schedule_runs INDEXED BY idx_schedule_runs_thread
    SET status = @to, finished_at = @now, error_message = @error_message,
        responses = (SELECT responses FROM usage), prompt_tokens = (SELECT prompt_tokens FROM usage),
        completion_tokens = (SELECT completion_tokens FROM usage), total_tokens = (SELECT total_tokens FROM usage)
    WHERE thread_id = @thread_id AND status IN (${from.map((s) => `'${s}'`).join(', ')})
    RETURNING *`;
  return prepared(db, sql).all({ thread_id: p.thread_id, to: p.to, now: p.now, error_message: p.error_message }) as ScheduleRunRow[];
}

/**
 * Ends a pending run that could not start its work (e.g. its project is gone), guarded by the stamp.
 * Nothing was called, so there is no usage to record.
 */
export function failUnstartedScheduleRun(db: Db, p: { id: string; owner: string; claimed_at: number; now: number; error_message: string }): void {
  const result = prepared(
    db,
    `UPDATE schedule_runs SET status = 'failed', finished_at = @now, error_message = @error_message,
       responses = 0, prompt_tokens = 0, completion_tokens = 0, total_tokens = 0
     WHERE id = @id AND status = 'pending' AND claim_owner = @owner AND claimed_at = @claimed_at AND thread_id IS NULL`,
  ).run(p);
  expectOneChange(result, `schedule run ${p.id} is no longer leased by ${p.owner} at ${p.claimed_at}`);
}

/** Runs newest period first, of one schedule or of all. */
export function listScheduleRuns(db: Db, p: { schedule_id: string | null; limit: number }): ScheduleRunRow[] {
  if (p.schedule_id !== null) {
    return prepared(db, 'SELECT * FROM schedule_runs WHERE schedule_id = ? ORDER BY period_at DESC LIMIT ?').all(p.schedule_id, p.limit) as ScheduleRunRow[];
  }
  return prepared(db, 'SELECT * FROM schedule_runs ORDER BY period_at DESC, schedule_id LIMIT ?').all(p.limit) as ScheduleRunRow[];
}

/** The newest run of a schedule (for `schedule list`). */
export function getLatestScheduleRun(db: Db, scheduleId: string): ScheduleRunRow | undefined {
  return prepared(db, 'SELECT * FROM schedule_runs WHERE schedule_id = ? ORDER BY period_at DESC LIMIT 1').get(scheduleId) as ScheduleRunRow | undefined;
}

export type PendingRun = ScheduleRunRow & Pick<ScheduleRow, 'operation' | 'input' | 'project_id' | 'timezone'>;

/** Pending runs of a project's schedules, with what each asks for (a document being generated is not ready). */
export function listPendingRunsForProject(db: Db, projectId: string): PendingRun[] {
  return prepared(
    db,
    `SELECT r.*, s.operation, s.input, s.project_id, s.timezone FROM schedule_runs r INDEXED BY idx_schedule_runs_pending
     JOIN schedules s ON s.id = r.schedule_id
     WHERE r.status = 'pending' AND s.project_id = ?`,
  ).all(projectId) as PendingRun[];
}
