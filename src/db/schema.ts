/**
 * The database schema (drizzle). Migrations in `migrations/` are generated from this file by
 * `npm run db:generate`; hand-written migrations (triggers) live next to them.
 *
 * Conventions: ids are text (UUIDs), times are integer milliseconds since the epoch, JSON is stored as
 * text. Property names equal column names so that rows read with plain prepared statements have
 * exactly the inferred types below.
 */
import { sql } from 'drizzle-orm';
import { index, integer, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';

export const projects = sqliteTable('projects', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  created_at: integer('created_at').notNull(),
});

export const documents = sqliteTable(
  'documents',
  {
    id: text('id').primaryKey(),
    project_id: text('project_id')
      .notNull()
      .references(() => projects.id),
    doc_type: text('doc_type').notNull(),
    /**
     * Tells apart documents of one type that exist once per something (a `briefing` per date); ''
     * for the types a project has exactly one of.
     */
    doc_key: text('doc_key').notNull().default(''),
    version: integer('version').notNull(),
    content: text('content').notNull(),
    updated_at: integer('updated_at').notNull(),
  },
  (t) => [uniqueIndex('uq_documents_project_type_key').on(t.project_id, t.doc_type, t.doc_key)],
);

export const threads = sqliteTable(
  'llm_threads',
  {
    id: text('id').primaryKey(),
    kind: text('kind').notNull(),
    space_type: text('space_type').notNull(),
    space_id: text('space_id').notNull(),
    target_ref: text('target_ref').notNull(),
    status: text('status').notNull().default('open'),
    parent_thread_id: text('parent_thread_id').references((): any => threads.id),
    idempotency_key: text('idempotency_key').notNull(),
    created_by: text('created_by'),
    created_at: integer('created_at').notNull(),
    closed_at: integer('closed_at'),
  },
  (t) => [
    // At most one active thread per semantic request: the database settles double submits.
    uniqueIndex('uq_threads_idempotency_active')
      .on(t.idempotency_key)
      .where(sql`status IN ('open', 'running')`),
    index('idx_threads_key_created').on(t.idempotency_key, t.created_at),
    index('idx_threads_parent').on(t.parent_thread_id).where(sql`parent_thread_id IS NOT NULL`),
    index('idx_threads_space_created').on(t.space_id, t.created_at),
    index('idx_threads_created').on(t.created_at),
    // `threads --active` stays fast however many closed threads accumulate.
    index('idx_threads_active').on(t.created_at).where(sql`status IN ('open', 'running')`),
  ],
);

export const workItems = sqliteTable(
  'llm_work_items',
  {
    id: text('id').primaryKey(),
    thread_id: text('thread_id')
      .notNull()
      .references(() => threads.id),
    sequence: integer('sequence').notNull().default(1),
    status: text('status').notNull().default('queued'),
    attempt: integer('attempt').notNull().default(1),
    max_attempts: integer('max_attempts').notNull().default(3),
    repair_count: integer('repair_count').notNull().default(0),
    lock_scope: text('lock_scope').notNull(),
    priority: integer('priority').notNull().default(0),
    not_before: integer('not_before').notNull(),
    deadline_at: integer('deadline_at'),
    lease_owner: text('lease_owner'),
    lease_expires_at: integer('lease_expires_at'),
    error_code: text('error_code'),
    error_message: text('error_message'),
    created_at: integer('created_at').notNull(),
    started_at: integer('started_at'),
    finished_at: integer('finished_at'),
  },
  (t) => [
    uniqueIndex('uq_work_items_thread_sequence').on(t.thread_id, t.sequence),
    // The claim scan reads only queued items, in claim order.
    index('idx_work_items_claimable')
      .on(t.priority, t.not_before, t.lock_scope)
      .where(sql`status = 'queued'`),
    // Deadline sweeps read only queued items that have a deadline.
    index('idx_work_items_deadline')
      .on(t.deadline_at)
      .where(sql`status = 'queued' AND deadline_at IS NOT NULL`),
    // The recovery scan reads only leased items, by expiry.
    index('idx_work_items_leased')
      .on(t.lease_expires_at)
      .where(sql`status IN ('claimed', 'running')`),
  ],
);

export const ledgerEntries = sqliteTable(
  'llm_ledger_entries',
  {
    /** Global order of the hash chain; also the entry's id. */
    seq: integer('seq').primaryKey(),
    thread_id: text('thread_id')
      .notNull()
      .references(() => threads.id),
    work_item_id: text('work_item_id').references(() => workItems.id),
    entry_type: text('entry_type').notNull(),
    /** The work item's attempt this entry belongs to (null for thread-level entries). */
    attempt: integer('attempt'),
    /** Canonical JSON (RFC 8785): the exact bytes that were hashed. */
    payload: text('payload').notNull(),
    prev_hash: text('prev_hash').notNull(),
    hash: text('hash').notNull(),
    created_at: integer('created_at').notNull(),
  },
  (t) => [
    index('idx_ledger_thread').on(t.thread_id, t.seq),
    index('idx_ledger_work_item').on(t.work_item_id, t.seq),
  ],
);

export const mutations = sqliteTable('mutations', {
  id: text('id').primaryKey(),
  /** Unique: a work item's mutation applies at most once. */
  work_item_id: text('work_item_id')
    .notNull()
    .unique()
    .references(() => workItems.id),
  thread_id: text('thread_id')
    .notNull()
    .references(() => threads.id),
  document_id: text('document_id')
    .notNull()
    .references(() => documents.id),
  from_version: integer('from_version').notNull(),
  to_version: integer('to_version').notNull(),
  summary: text('summary').notNull(),
  created_at: integer('created_at').notNull(),
});

export const locks = sqliteTable('locks', {
  scope: text('scope').primaryKey(),
  owner: text('owner').notNull(),
  acquired_at: integer('acquired_at').notNull(),
  /** Null: held until released (orchestration locks); otherwise reclaimable after this time. */
  expires_at: integer('expires_at'),
});

/** Telemetry only: execution never reads this table for correctness (ADR-035 §13). */
export const callRecords = sqliteTable(
  'llm_call_records',
  {
    id: integer('id').primaryKey({ autoIncrement: true }),
    thread_id: text('thread_id').notNull(),
    work_item_id: text('work_item_id').notNull(),
    model: text('model').notNull(),
    outcome: text('outcome').notNull(),
    http_status: integer('http_status'),
    latency_ms: integer('latency_ms').notNull(),
    prompt_tokens: integer('prompt_tokens'),
    completion_tokens: integer('completion_tokens'),
    total_tokens: integer('total_tokens'),
    provider_request_id: text('provider_request_id'),
    created_at: integer('created_at').notNull(),
  },
  (t) => [index('idx_call_records_thread').on(t.thread_id)],
);

/** Cron schedules of recurring operations (`combine schedule add`). Removal is a status: history stays. */
export const schedules = sqliteTable('schedules', {
  id: text('id').primaryKey(),
  project_id: text('project_id')
    .notNull()
    .references(() => projects.id),
  /** `briefing` | `generate-all`. */
  operation: text('operation').notNull(),
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
});

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

export type ProjectRow = typeof projects.$inferSelect;
export type DocumentRow = typeof documents.$inferSelect;
export type ThreadRow = typeof threads.$inferSelect;
export type WorkItemRow = typeof workItems.$inferSelect;
export type LedgerRow = typeof ledgerEntries.$inferSelect;
export type MutationRow = typeof mutations.$inferSelect;
export type LockRow = typeof locks.$inferSelect;
export type CallRecordRow = typeof callRecords.$inferSelect;
export type ScheduleRow = typeof schedules.$inferSelect;
export type ScheduleRunRow = typeof scheduleRuns.$inferSelect;
