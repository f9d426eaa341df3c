/**
 * The scheduler's tables (spec 004): schedules and their runs, the lease of lease-then-LLM. Part of the
 * drizzle schema with schema.ts (drizzle.config.ts reads both).
 */
import { sql } from 'drizzle-orm';
import { index, integer, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';
import { projects, threads } from './schema.js';

/** Cron schedules of recurring operations (`combine schedule add`). Removal is a status: history stays. */
export const schedules = sqliteTable(
  'schedules',
  {
    id: text('id').primaryKey(),
    project_id: text('project_id')
      .notNull()
      .references(() => projects.id),
    /** An operation name, or a schedule alias (`briefing`, `generate-all`; see operations/builtin). */
    operation: text('operation').notNull(),
    /**
     * The input template of each run (JSON object): `"{{date}}"` becomes the period's date in `timezone`,
     * and `project_id` defaults to the schedule's project.
     */
    input: text('input').notNull().default('{}'),
    cron: text('cron').notNull(),
    /** IANA time zone the cron expression is read in. */
    timezone: text('timezone').notNull(),
    /** What a tick does about periods missed while no daemon ran: `latest` runs the newest once, `skip` none. */
    catch_up: text('catch_up').notNull(),
    /** `active` | `paused` | `removed`. */
    status: text('status').notNull(),
    /** Periods before this time never run: the creation time, moved forward on resume. */
    active_from: integer('active_from').notNull(),
    created_at: integer('created_at').notNull(),
    updated_at: integer('updated_at').notNull(),
  },
  (t) => [index('idx_schedules_id_tail').on(sql`substr(${t.id}, 25)`)],
);

/**
 * One row per (schedule, period): the lease of lease-then-LLM (spec 004). The UNIQUE index decides
 * which claimer runs a period; `pending` rows are in flight and re-claimed by stamp when stale.
 */
export const scheduleRuns = sqliteTable(
  'schedule_runs',
  {
    id: text('id').primaryKey(),
    schedule_id: text('schedule_id')
      .notNull()
      .references(() => schedules.id),
    /** The period's fire time, ISO 8601 UTC: the natural key with schedule_id. */
    period_key: text('period_key').notNull(),
    period_at: integer('period_at').notNull(),
    /** `pending` | `complete` | `failed` | `canceled`. */
    status: text('status').notNull(),
    /** The lease stamp: who claimed the period and when; a re-claim rewrites both. */
    claim_owner: text('claim_owner').notNull(),
    claimed_at: integer('claimed_at').notNull(),
    claims: integer('claims').notNull().default(1),
    thread_id: text('thread_id').references(() => threads.id),
    error_message: text('error_message'),
    /** Usage of the run's provider answers, recorded once when the run is finalized. */
    responses: integer('responses'),
    prompt_tokens: integer('prompt_tokens'),
    completion_tokens: integer('completion_tokens'),
    total_tokens: integer('total_tokens'),
    created_at: integer('created_at').notNull(),
    finished_at: integer('finished_at'),
  },
  (t) => [
    uniqueIndex('uq_schedule_runs_period').on(t.schedule_id, t.period_key),
    // The recovery clause reads only pending rows, oldest stamp first.
    index('idx_schedule_runs_pending').on(t.claimed_at).where(sql`status = 'pending'`),
    index('idx_schedule_runs_thread').on(t.thread_id).where(sql`thread_id IS NOT NULL`),
  ],
);

export type ScheduleRow = typeof schedules.$inferSelect;
export type ScheduleRunRow = typeof scheduleRuns.$inferSelect;
