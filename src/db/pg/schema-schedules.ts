/**
 * The scheduler's tables in Postgres (drizzle pg-core), as ../schema-schedules.ts is for SQLite: schedules
 * and their runs, the lease of lease-then-LLM. Part of the pg schema with ./schema.ts.
 */
import { sql } from 'drizzle-orm';
import { index, integer, pgTable, uniqueIndex } from 'drizzle-orm/pg-core';
import { RUN_STATUSES, SCHEDULE_STATUSES } from '../../domain/schedule.js';
import { int8, projects, statusCheck, text, threads } from './schema.js';

export const schedules = pgTable(
  'schedules',
  {
    id: text('id').primaryKey(),
    project_id: text('project_id')
      .notNull()
      .references(() => projects.id),
    operation: text('operation').notNull(),
    input: text('input').notNull().default('{}'),
    cron: text('cron').notNull(),
    timezone: text('timezone').notNull(),
    catch_up: text('catch_up').notNull(),
    status: text('status').notNull(),
    active_from: int8('active_from').notNull(),
    created_at: int8('created_at').notNull(),
    updated_at: int8('updated_at').notNull(),
  },
  (t) => [index('idx_schedules_id_tail').on(sql`substr(${t.id}, 25)`), statusCheck('schedules', t.status, SCHEDULE_STATUSES)],
);

/** The lease of lease-then-LLM (spec 004): the UNIQUE index decides which daemon runs a period. */
export const scheduleRuns = pgTable(
  'schedule_runs',
  {
    id: text('id').primaryKey(),
    schedule_id: text('schedule_id')
      .notNull()
      .references(() => schedules.id),
    period_key: text('period_key').notNull(),
    period_at: int8('period_at').notNull(),
    status: text('status').notNull(),
    claim_owner: text('claim_owner').notNull(),
    claimed_at: int8('claimed_at').notNull(),
    claims: integer('claims').notNull().default(1),
    thread_id: text('thread_id').references(() => threads.id),
    error_message: text('error_message'),
    responses: integer('responses'),
    // Sums over a thread and all its children (db/schedules.ts): bigint, as a sum may pass 2^31-1 (pg 0021).
    prompt_tokens: int8('prompt_tokens'),
    completion_tokens: int8('completion_tokens'),
    total_tokens: int8('total_tokens'),
    created_at: int8('created_at').notNull(),
    finished_at: int8('finished_at'),
  },
  (t) => [
    uniqueIndex('uq_schedule_runs_period').on(t.schedule_id, t.period_key),
    index('idx_schedule_runs_pending').on(t.claimed_at).where(sql`status = 'pending'`),
    index('idx_schedule_runs_thread').on(t.thread_id).where(sql`thread_id IS NOT NULL`),
    statusCheck('schedule_runs', t.status, RUN_STATUSES),
  ],
);
