/**
 * schedules and schedule_runs. A run row is the lease of lease-then-LLM (spec 004): it is INSERTed as
 * `pending` before any work, its UNIQUE (schedule_id, period_key) decides the one claimer of a period,
 * a stale `pending` row is re-claimed by rewriting its stamp, and it is finalized by an UPDATE.
 */
import type { Sql } from '../core/sql.js';
import { runStatusesLeadingTo, SCHEDULE_TRANSITIONS, type RunStatus, type ScheduleStatus } from '../domain/schedule.js';
import { inJsonArray, jsonNumber } from './dialect.js';
import type { ScheduleRow, ScheduleRunRow } from './schema-schedules.js';
import { inThreadAndChildren } from './thread-and-children.js';
import { DONE, expectOneChange } from './statements.js';
import { IllegalTransitionError, StaleStateError } from '../core/errors.js';

export async function insertSchedule(sql: Sql, row: ScheduleRow): Promise<void> {
  await sql.run(
    `INSERT INTO schedules (id, project_id, operation, input, cron, timezone, catch_up, status, active_from, created_at, updated_at)
     VALUES (@id, @project_id, @operation, @input, @cron, @timezone, @catch_up, @status, @active_from, @created_at, @updated_at)`,
    row,
  );
}

export async function getSchedule(sql: Sql, id: string): Promise<ScheduleRow | undefined> {
  return (await sql.get('SELECT * FROM schedules WHERE id = ?', [id])) as ScheduleRow | undefined;
}

/** Schedules a person sees: not removed (unless asked), oldest first. */
export async function listSchedules(sql: Sql, includeRemoved: boolean): Promise<ScheduleRow[]> {
  return (await sql.all("SELECT * FROM schedules WHERE status <> 'removed' OR @includeRemoved ORDER BY created_at, id", {
    includeRemoved: includeRemoved ? 1 : 0,
  })) as ScheduleRow[];
}

/** The schedules a tick looks at. */
export async function listActiveSchedules(sql: Sql): Promise<ScheduleRow[]> {
  return (await sql.all("SELECT * FROM schedules WHERE status = 'active'")) as ScheduleRow[];
}

/**
 * Moves a schedule between statuses (pause, resume, remove); a resume also moves `active_from` to now
 * so that periods that passed while paused are not caught up.
 */
export async function transitionSchedule(sql: Sql, p: { id: string; from: ScheduleStatus; to: ScheduleStatus; now: number }): Promise<void> {
  if (!SCHEDULE_TRANSITIONS[p.from].includes(p.to)) throw new IllegalTransitionError('schedule', p.from, p.to);
  const result = await sql.run(
    `UPDATE schedules
     SET status = @to, updated_at = @now,
         active_from = CASE WHEN @to = 'active' THEN @now ELSE active_from END
     WHERE id = @id AND status = @from`,
    p,
  );
  expectOneChange(result, `schedule ${p.id} is not ${p.from}`);
}

export async function getScheduleRunForPeriod(sql: Sql, scheduleId: string, periodKey: string): Promise<ScheduleRunRow | undefined> {
  return (await sql.get('SELECT * FROM schedule_runs WHERE schedule_id = ? AND period_key = ?', [scheduleId, periodKey])) as ScheduleRunRow | undefined;
}

export async function getScheduleRun(sql: Sql, id: string): Promise<ScheduleRunRow | undefined> {
  return (await sql.get('SELECT * FROM schedule_runs WHERE id = ?', [id])) as ScheduleRunRow | undefined;
}

/**
 * Step 1 of lease-then-LLM: the claim. Returns the new `pending` row, or undefined when the period
 * already has a row — another claimer won it (or it already ran), and the caller must do nothing.
 */
export async function claimSchedulePeriod(
  sql: Sql,
  p: { id: string; schedule_id: string; period_key: string; period_at: number; owner: string; now: number },
): Promise<ScheduleRunRow | undefined> {
  return (await sql.get(
    `INSERT INTO schedule_runs (id, schedule_id, period_key, period_at, status, claim_owner, claimed_at, claims, created_at)
     VALUES (@id, @schedule_id, @period_key, @period_at, 'pending', @owner, @now, 1, @now)
     ON CONFLICT (schedule_id, period_key) DO NOTHING
     RETURNING *`,
    p,
  )) as ScheduleRunRow | undefined;
}

/**
 * The recovery clause: takes over `pending` rows whose stamp is older than `stale_before` by writing a
 * new stamp, never by a second INSERT. Of two claimers racing here the second sees a fresh stamp and
 * gets nothing back.
 */
export async function reclaimStaleScheduleRuns(sql: Sql, p: { owner: string; now: number; stale_before: number }): Promise<ScheduleRunRow[]> {
  return (await sql.all(
    `UPDATE schedule_runs INDEXED BY idx_schedule_runs_pending
     SET claim_owner = @owner, claimed_at = @now, claims = claims + 1
     WHERE status = 'pending' AND claimed_at < @stale_before
     RETURNING *`,
    p,
  )) as ScheduleRunRow[];
}

/** The oldest lease stamp among pending runs: when the next re-claim can become due. */
export async function oldestPendingClaim(sql: Sql): Promise<number | null> {
  const row = (await sql.get("SELECT min(claimed_at) AS t FROM schedule_runs INDEXED BY idx_schedule_runs_pending WHERE status = 'pending'")) as {
    t: number | null;
  };
  return row.t;
}

/**
 * Records the thread that does a claimed run's work. Guarded by the stamp: a claimer whose lease was
 * re-claimed by someone else (it stalled past the stale window) changes nothing and is told so.
 */
export async function linkScheduleRunThread(sql: Sql, p: { id: string; owner: string; claimed_at: number; thread_id: string }): Promise<void> {
  const result = await sql.run(
    `UPDATE schedule_runs SET thread_id = @thread_id
     WHERE id = @id AND status = 'pending' AND claim_owner = @owner AND claimed_at = @claimed_at AND thread_id IS NULL`,
    p,
  );
  expectOneChange(result, `schedule run ${p.id} is no longer leased by ${p.owner} at ${p.claimed_at}`);
}

/** Which of these threads (walked as a set) a schedule run in `pending` waits for. */
export async function listThreadsWithPendingRun(sql: Sql, threadIds: readonly string[]): Promise<string[]> {
  const rows = await sql.all<{ thread_id: string }>(
    `SELECT DISTINCT thread_id FROM schedule_runs WHERE status = 'pending' AND ${inJsonArray(sql.dialect, 'thread_id', '@ids')}`,
    { ids: JSON.stringify(threadIds) },
  );
  return rows.map((r) => r.thread_id);
}

/**
 * Step 3 of lease-then-LLM: finalizes the run done by `thread_id` and records its usage — the token
 * counts of every `response` in the ledger of the thread and of its children — in the same UPDATE,
 * so usage is written exactly when the status leaves `pending`, once. Returns the finalized runs: most
 * threads belong to none; two schedules asking for the same work at once share one thread.
 */
export async function finalizeScheduleRunOfThread(sql: Sql, p: FinalizeRun): Promise<ScheduleRunRow[]> {
  return (await sql.all(finalizeText(sql.dialect, p.to), finalizeValues(p))) as ScheduleRunRow[];
}

/**
 * `finalizeScheduleRunOfThread` for a caller that needs no rows back (the engine's every ending thread,
 * which mostly belongs to no run): on a handle that runs statements in its COMMIT's query (the Postgres
 * writer's `Sql.atCommit`) it is queued there — ahead of the ledger append the transaction queues at its
 * end, so the run row is still locked before the chain head, as when it ran here — instead of costing a
 * round trip of its own; elsewhere it runs now.
 */
export function finalizeScheduleRunOfThreadAtCommit(sql: Sql, p: FinalizeRun): Promise<unknown> {
  if (!sql.atCommit) return finalizeScheduleRunOfThread(sql, p);
  sql.atCommit(finalizeText(sql.dialect, p.to), finalizeValues(p), ignoreRows);
  return DONE;
}

const ignoreRows = () => {};

type FinalizeRun = { thread_id: string; to: Exclude<RunStatus, 'pending'>; now: number; error_message: string | null };

/** The finalizing statement's parameters: exactly its own (a caller's object may carry more). */
function finalizeValues(p: FinalizeRun) {
  return { thread_id: p.thread_id, to: p.to, now: p.now, error_message: p.error_message };
}

/**
 * `finalizeScheduleRunOfThread`'s statement per dialect and target status, built once: it runs for every
 * thread that ends, and a text built per call costs a copy and a hash of its every character for the
 * statement cache's look-up.
 */
const finalizeTexts = { sqlite: new Map<RunStatus, string>(), postgres: new Map<RunStatus, string>() };

function finalizeText(dialect: Sql['dialect'], to: Exclude<RunStatus, 'pending'>): string {
  const built = finalizeTexts[dialect].get(to);
  if (built !== undefined) return built;
  const from = runStatusesLeadingTo(to);
  if (from.length === 0) throw new StaleStateError(`no run status leads to ${to}`);
  const text = `
    UPDATE schedule_runs INDEXED BY idx_schedule_runs_thread
    SET status = @to, finished_at = @now, error_message = @error_message,
        ${RUN_USAGE_COLUMNS} = (${runUsage(dialect, '@thread_id')})
    WHERE thread_id = @thread_id AND status IN (${from.map((s) => `'${s}'`).join(', ')})
    RETURNING *`;
  finalizeTexts[dialect].set(to, text);
  return text;
}

/**
 * `finalizeScheduleRunOfThreadAtCommit` of several threads that all completed, in one statement: the runs
 * of any of them still in a status leading to `complete` (most threads belong to none) finalized with their
 * usage. Postgres only: only a Postgres closure of answers ends several completed threads together
 * (engine/ends-together.ts); the text is Postgres's. Queued in the COMMIT's query where the handle runs
 * statements there (one EXECUTE per closure, not one per thread); elsewhere it runs now.
 */
export function finalizeCompletedScheduleRunsAtCommit(sql: Sql, p: { thread_ids: readonly string[]; now: number }): Promise<unknown> {
  const params = { ids: JSON.stringify(p.thread_ids), now: p.now };
  if (!sql.atCommit) return sql.run(FINALIZE_COMPLETED_PG, params);
  sql.atCommit(FINALIZE_COMPLETED_PG, params, ignoreRows);
  return DONE;
}

/** The run columns `runUsage`'s row sets, in its order. */
const RUN_USAGE_COLUMNS = '(responses, prompt_tokens, completion_tokens, total_tokens)';

/**
 * A run's usage, one row in `RUN_USAGE_COLUMNS`' order: its response count and token sums over the
 * `response` entries of its thread (`threadId`: a parameter, or the updated row's column) and of that
 * thread's children (one `IN` list: thread-and-children.ts). The one text of both finalizing statements, so
 * the two cannot sum differently; set as one row, the entries are read once per run, not once per column.
 */
function runUsage(dialect: Sql['dialect'], threadId: string): string {
  const sum = (path: string) => `coalesce(sum(${jsonNumber(dialect, 'e.payload', path)}), 0)`;
  return `SELECT count(*), ${sum('usage.prompt_tokens')}, ${sum('usage.completion_tokens')}, ${sum('usage.total_tokens')}
      FROM llm_ledger_entries e
      WHERE e.entry_type = 'response'
        AND e.thread_id ${inThreadAndChildren(threadId)}`;
}

const FINALIZE_COMPLETED_PG = `
    UPDATE schedule_runs
    SET status = 'complete', finished_at = @now, error_message = NULL,
        ${RUN_USAGE_COLUMNS} = (${runUsage('postgres', 'schedule_runs.thread_id')})
    WHERE ${inJsonArray('postgres', 'thread_id', '@ids')} AND status IN (${runStatusesLeadingTo('complete')
      .map((s) => `'${s}'`)
      .join(', ')})`;

/**
 * Ends a pending run that could not start its work (e.g. its project is gone), guarded by the stamp.
 * Nothing was called, so there is no usage to record.
 */
export async function failUnstartedScheduleRun(
  sql: Sql,
  p: { id: string; owner: string; claimed_at: number; now: number; error_message: string },
): Promise<void> {
  const result = await sql.run(
    `UPDATE schedule_runs SET status = 'failed', finished_at = @now, error_message = @error_message,
       responses = 0, prompt_tokens = 0, completion_tokens = 0, total_tokens = 0
     WHERE id = @id AND status = 'pending' AND claim_owner = @owner AND claimed_at = @claimed_at AND thread_id IS NULL`,
    p,
  );
  expectOneChange(result, `schedule run ${p.id} is no longer leased by ${p.owner} at ${p.claimed_at}`);
}

/** Runs newest period first, of one schedule or of all. */
export async function listScheduleRuns(sql: Sql, p: { schedule_id: string | null; limit: number }): Promise<ScheduleRunRow[]> {
  if (p.schedule_id !== null) {
    return (await sql.all('SELECT * FROM schedule_runs WHERE schedule_id = ? ORDER BY period_at DESC LIMIT ?', [p.schedule_id, p.limit])) as ScheduleRunRow[];
  }
  return (await sql.all('SELECT * FROM schedule_runs ORDER BY period_at DESC, schedule_id LIMIT ?', [p.limit])) as ScheduleRunRow[];
}

/** The newest run of a schedule (for `schedule list`). */
export async function getLatestScheduleRun(sql: Sql, scheduleId: string): Promise<ScheduleRunRow | undefined> {
  return (await sql.get('SELECT * FROM schedule_runs WHERE schedule_id = ? ORDER BY period_at DESC LIMIT 1', [scheduleId])) as ScheduleRunRow | undefined;
}

export type PendingRun = ScheduleRunRow & Pick<ScheduleRow, 'operation' | 'input' | 'project_id' | 'timezone'>;

/** Pending runs of a project's schedules, with what each asks for (a document being generated is not ready). */
export async function listPendingRunsForProject(sql: Sql, projectId: string): Promise<PendingRun[]> {
  return (await sql.all(
    `SELECT r.*, s.operation, s.input, s.project_id, s.timezone FROM schedule_runs r INDEXED BY idx_schedule_runs_pending
     JOIN schedules s ON s.id = r.schedule_id
     WHERE r.status = 'pending' AND s.project_id = ?`,
    [projectId],
  )) as PendingRun[];
}
