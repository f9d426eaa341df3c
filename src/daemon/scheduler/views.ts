/**
 * The public JSON shapes of schedules and runs (`--json` output is stable: add fields,
 * never rename or remove them). A `pending` run is not ready: it shows no usage.
 */
import type { Sql } from '../../core/sql.js';
import type { ScheduleRow, ScheduleRunRow } from '../../db/schema-schedules.js';
import { getLatestScheduleRun } from '../../db/schedules.js';
import { getThread } from '../../db/threads.js';
import { nextFireAt } from '../../domain/schedule.js';

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export interface ScheduleView {
  schedule_id: string;
  project_id: string;
  operation: string;
  /** The input template of each run (`{{date}}`: the period's date); present only when one was given. */
  input?: Record<string, unknown>;
  cron: string;
  timezone: string;
  catch_up: string;
  status: string;
  created_at: string;
  /** The next period that will run (null unless active). */
  next_run_at: string | null;
  last_run: { run_id: string; period_key: string; status: string } | null;
}

export interface RunView {
  run_id: string;
  schedule_id: string;
  period_key: string;
  status: string;
  /** False while `pending`: the run's result and usage are not there yet. */
  ready: boolean;
  /** 1, or more when the lease was re-claimed after going stale. */
  claims: number;
  claimed_at: string;
  thread_id: string | null;
  thread_status: string | null;
  error: string | null;
  /** Recorded once, when the run is finalized; null while pending. */
  usage: { responses: number; prompt_tokens: number; completion_tokens: number; total_tokens: number } | null;
  created_at: string;
  finished_at: string | null;
}

export async function scheduleView(sql: Sql, s: ScheduleRow, now: number): Promise<ScheduleView> {
  const last = await getLatestScheduleRun(sql, s.id);
  let next: number | null = null;
  try {
    next = s.status === 'active' ? nextFireAt(s, Math.max(now, s.active_from)) : null;
  } catch {
    next = null;
  }
  return {
    schedule_id: s.id,
    project_id: s.project_id,
    operation: s.operation,
    ...(s.input !== '{}' ? { input: JSON.parse(s.input) as Record<string, unknown> } : {}),
    cron: s.cron,
    timezone: s.timezone,
    catch_up: s.catch_up,
    status: s.status,
    created_at: iso(s.created_at)!,
    next_run_at: iso(next),
    last_run: last ? { run_id: last.id, period_key: last.period_key, status: last.status } : null,
  };
}

export async function runView(sql: Sql, r: ScheduleRunRow): Promise<RunView> {
  const thread = r.thread_id ? await getThread(sql, r.thread_id) : undefined;
  const ready = r.status !== 'pending';
  return {
    run_id: r.id,
    schedule_id: r.schedule_id,
    period_key: r.period_key,
    status: r.status,
    ready,
    claims: r.claims,
    claimed_at: iso(r.claimed_at)!,
    thread_id: r.thread_id,
    thread_status: thread?.status ?? null,
    error: r.error_message,
    usage: ready
      ? {
          responses: r.responses ?? 0,
          prompt_tokens: r.prompt_tokens ?? 0,
          completion_tokens: r.completion_tokens ?? 0,
          total_tokens: r.total_tokens ?? 0,
        }
      : null,
    created_at: iso(r.created_at)!,
    finished_at: iso(r.finished_at),
  };
}
