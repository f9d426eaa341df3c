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
    version: integer('version').notNull(),
    content: text('content').notNull(),
    updated_at: integer('updated_at').notNull(),
  },
  (t) => [uniqueIndex('uq_documents_project_type').on(t.project_id, t.doc_type)],
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

export type ProjectRow = typeof projects.$inferSelect;
export type DocumentRow = typeof documents.$inferSelect;
export type ThreadRow = typeof threads.$inferSelect;
export type WorkItemRow = typeof workItems.$inferSelect;
export type LedgerRow = typeof ledgerEntries.$inferSelect;
export type MutationRow = typeof mutations.$inferSelect;
export type LockRow = typeof locks.$inferSelect;
export type CallRecordRow = typeof callRecords.$inferSelect;

/**
 * Retention checkpoints: each row stands for one run of consecutive ledger entries that `combine prune`
 * removed, and keeps the chain hashes on both sides of the cut, so `combine ledger verify` can bridge
 * the gap. Append-only (triggers); the delete trigger on the ledger admits only entries a checkpoint
 * already covers, and the insert trigger admits only checkpoints that describe entries that exist.
 */
export const ledgerCheckpoints = sqliteTable('llm_ledger_checkpoints', {
  /** First removed seq. Runs never overlap, so the run covering a seq is the one with the greatest from_seq ≤ it. */
  from_seq: integer('from_seq').primaryKey(),
  /** Last removed seq (inclusive). */
  to_seq: integer('to_seq').notNull(),
  /** The chain hash just before the cut: `prev_hash` of entry from_seq. */
  hash_before: text('hash_before').notNull(),
  /** The chain hash at the end of the cut: `hash` of entry to_seq, which the next entry links to. */
  hash_after: text('hash_after').notNull(),
  /** Groups the runs of one prune. */
  prune_id: text('prune_id').notNull(),
  /** Threads closed before this time were removed. */
  cutoff_at: integer('cutoff_at').notNull(),
  created_at: integer('created_at').notNull(),
});

export type LedgerCheckpointRow = typeof ledgerCheckpoints.$inferSelect;
