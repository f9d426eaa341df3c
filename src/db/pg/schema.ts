/**
 * The Postgres schema (drizzle pg-core): the same tables, columns, keys and indexes as the SQLite
 * schema in ../schema.ts (the scheduler's tables: ./schema-schedules.ts, as ../schema-schedules.ts), so
 * one set of row types serves both backends (test/unit/pg-schema.test.ts checks that they stay equal).
 * Migrations in `migrations/pg/` are generated from both files by `npm run db:generate:pg`; hand-written ones (triggers, in plpgsql) live next to them.
 *
 * Types: times (ms since the epoch) and ledger seqs are `bigint` read as JS numbers (they stay far
 * below 2^53; the connection parses int8 as a number); SQLite's `real` is `double precision`; JSON is
 * `text`, because the ledger hashes the exact bytes stored and jsonb would reformat them.
 *
 * Beyond the SQLite schema: `llm_ledger_head`, the chain's head row that serializes appends across
 * daemons (see migrations/pg/0001_triggers.sql); `llm_rate_limits`, the rate limiter all daemons share; `llm_queue_depth` has several rows (one per shard)
 * whose sum is the queue depth, so concurrent transactions do not all wait on one counter row.
 */
import { sql } from 'drizzle-orm';
import { type AnyPgColumn, bigint, check, customType, doublePrecision, index, integer, pgTable, primaryKey, uniqueIndex } from 'drizzle-orm/pg-core';
import { CHARGE_STATUSES, THREAD_STATUSES, WORK_ITEM_STATUSES } from '../../domain/states.js';

/**
 * Every text column compares and sorts byte-wise (`COLLATE "C"`), as SQLite's do, whatever the database's
 * collation: id prefix ranges (db/id-prefix.ts), `ORDER BY` on ids, keys and statuses, and unique keys
 * then mean the same on both backends (under e.g. en_US, 'a-b' < 'aa' and case is folded when sorting).
 */
const textC = customType<{ data: string }>({ dataType: () => 'text COLLATE "C"' });
export const text = (name: string) => textC(name);

/** Milliseconds since the epoch, or a ledger seq: int8, read as a JS number. */
export const int8 = (name: string) => bigint(name, { mode: 'number' });

/**
 * A status column accepts only the states of its machine: a real CHECK constraint, named
 * `<table>_status_check`, built from the domain's list. SQLite enforces the same lists with triggers
 * (migrations/0014_status_checks.sql), because it cannot add a CHECK to an existing table;
 * test/integration/postgres-schema.test.ts checks that both refuse exactly the same values.
 */
export function statusCheck(table: string, status: AnyPgColumn, statuses: readonly string[]) {
  return check(`${table}_status_check`, sql`${status} IN (${sql.raw(statuses.map((s) => `'${s}'`).join(', '))})`);
}

export const projects = pgTable('projects', {
  id: text('id').primaryKey(),
  name: text('name').notNull(),
  created_at: int8('created_at').notNull(),
});

export const documents = pgTable(
  'documents',
  {
    id: text('id').primaryKey(),
    project_id: text('project_id')
      .notNull()
      .references(() => projects.id),
    doc_type: text('doc_type').notNull(),
    doc_key: text('doc_key').notNull().default(''),
    version: integer('version').notNull(),
    content: text('content').notNull(),
    updated_at: int8('updated_at').notNull(),
    parts_field: text('parts_field'),
    parts_key: text('parts_key'),
    parts_chars: int8('parts_chars').notNull().default(0),
  },
  (t) => [uniqueIndex('uq_documents_project_type_key').on(t.project_id, t.doc_type, t.doc_key)],
);

export const documentParts = pgTable(
  'document_parts',
  {
    document_id: text('document_id')
      .notNull()
      .references(() => documents.id),
    part_key: text('part_key').notNull(),
    ord: doublePrecision('ord').notNull(),
    content: text('content').notNull(),
    /** The document version that wrote this part's content (a cached older version reads only the parts after it). */
    version: integer('version').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.document_id, t.part_key] }), index('idx_document_parts_ord').on(t.document_id, t.ord)],
);

export const threads = pgTable(
  'llm_threads',
  {
    id: text('id').primaryKey(),
    kind: text('kind').notNull(),
    space_type: text('space_type').notNull(),
    space_id: text('space_id').notNull(),
    target_ref: text('target_ref').notNull(),
    status: text('status').notNull().default('open'),
    parent_thread_id: text('parent_thread_id').references((): AnyPgColumn => threads.id),
    idempotency_key: text('idempotency_key').notNull(),
    role: text('role').notNull().default('work'),
    input: text('input').notNull().default('{}'),
    created_by: text('created_by'),
    traceparent: text('traceparent'),
    created_at: int8('created_at').notNull(),
    closed_at: int8('closed_at'),
  },
  (t) => [
    // At most one active thread per semantic request, across every daemon: the database settles double submits.
    uniqueIndex('uq_threads_idempotency_active').on(t.idempotency_key).where(sql`status IN ('open', 'running')`),
    // A request's newest completion (a repeated request is answered by it; retention keeps it): complete threads
    // only. An index of every thread by key took an entry at each of a thread's insert and status moves (three per
    // item on Postgres, where a status move is never a HOT update); this one takes one, at its completion.
    index('idx_threads_key_complete').on(t.idempotency_key, t.created_at).where(sql`status = 'complete'`),
    // A parent's children by status: whether one is still active (every child's end asks, `lockThreadForClose`) reads
    // only its active children's entries, not every child's, nor every active thread's (Postgres ANDed the parent
    // index with idx_threads_active: ~200 + ~1,200 entries per child's end at 160 children).
    index('idx_threads_parent_status').on(t.parent_thread_id, t.status).where(sql`parent_thread_id IS NOT NULL`),
    index('idx_threads_space_created').on(t.space_id, t.created_at),
    index('idx_threads_created').on(t.created_at),
    index('idx_threads_active').on(t.created_at).where(sql`status IN ('open', 'running')`),
    index('idx_threads_ended_badly').on(t.created_at).where(sql`status IN ('failed', 'canceled')`),
    index('idx_threads_kind_created').on(t.kind, t.created_at),
    // Short ids are the random tail of the UUIDv7 (db/id-prefix.ts).
    index('idx_threads_id_tail').on(sql`substr(${t.id}, 25)`),
    statusCheck('llm_threads', t.status, THREAD_STATUSES),
  ],
);

export const workItems = pgTable(
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
    escalated: integer('escalated').notNull().default(0),
    lock_scope: text('lock_scope').notNull(),
    project_id: text('project_id').notNull().default(''),
    priority: integer('priority').notNull().default(0),
    not_before: int8('not_before').notNull(),
    deadline_at: int8('deadline_at'),
    lease_owner: text('lease_owner'),
    lease_expires_at: int8('lease_expires_at'),
    error_code: text('error_code'),
    error_message: text('error_message'),
    created_at: int8('created_at').notNull(),
    started_at: int8('started_at'),
    finished_at: int8('finished_at'),
  },
  (t) => [
    uniqueIndex('uq_work_items_thread_sequence').on(t.thread_id, t.sequence),
    index('idx_work_items_claimable').on(t.priority, t.not_before, t.lock_scope).where(sql`status = 'queued'`),
    // deduplicate_items off: a group's items queued at one clock reading share a key, and one posting list
    // would hold them all; a claimed item's entry in it is never marked dead (a posting list is marked only when
    // all its items are dead), so every head's read walked every claimed item of the group before the first
    // queued one. Each entry on its own is marked dead by the first read that finds its item claimed.
    index('idx_work_items_fair').on(t.project_id, t.priority, t.not_before).with({ deduplicate_items: false }).where(sql`status = 'queued'`),
    index('idx_work_items_deadline').on(t.deadline_at).where(sql`status = 'queued' AND deadline_at IS NOT NULL`),
    index('idx_work_items_parked').on(t.project_id).where(sql`status = 'queued' AND error_code = 'BUDGET_EXCEEDED'`),
    // Every daemon's recovery scan reads only leased items, by expiry.
    index('idx_work_items_leased').on(t.lease_expires_at).where(sql`status IN ('claimed', 'running')`),
    index('idx_work_items_id_tail').on(sql`substr(${t.id}, 25)`),
    statusCheck('llm_work_items', t.status, WORK_ITEM_STATUSES),
  ],
);

/**
 * The queue depth, as the SUM of a few shard rows kept exact by triggers on llm_work_items: row triggers for
 * UPDATE and DELETE (migrations/pg/0017), a statement trigger for INSERT (0023). A transaction adds its change to the shard of its backend, so
 * daemons enqueueing and claiming at the same time rarely wait on one another's counter row.
 */
export const queueDepth = pgTable('llm_queue_depth', {
  id: integer('id').primaryKey(),
  queued: integer('queued').notNull(),
});

export const ledgerEntries = pgTable(
  'llm_ledger_entries',
  {
    seq: int8('seq').primaryKey(),
    thread_id: text('thread_id')
      .notNull()
      .references(() => threads.id),
    work_item_id: text('work_item_id').references(() => workItems.id),
    entry_type: text('entry_type').notNull(),
    attempt: integer('attempt'),
    payload: text('payload').notNull(),
    prev_hash: text('prev_hash').notNull(),
    hash: text('hash').notNull(),
    created_at: int8('created_at').notNull(),
  },
  (t) => [index('idx_ledger_thread').on(t.thread_id, t.seq), index('idx_ledger_work_item').on(t.work_item_id, t.seq)],
);

/**
 * The hash chain's last link (one row). Every append locks it (`FOR UPDATE`) in the appending
 * transaction, takes seq + 1 and prev_hash from it and moves it: `llm_ledger_append` itself, or, for
 * an INSERT that does not come from that function, a trigger that refuses an entry that does not link
 * (migrations/pg/0013): daemons sharing the database extend one chain that can neither fork nor skip.
 * `combine prune` leaves it alone, so seqs are never reused.
 */
export const ledgerHead = pgTable(
  'llm_ledger_head',
  {
    id: integer('id').primaryKey(),
    seq: int8('seq').notNull(),
    hash: text('hash').notNull(),
  },
  () => [check('llm_ledger_head_one_row', sql`id = 1`)],
);

/**
 * The rate limiter shared by every daemon on the database (Postgres only; one SQLite daemon keeps it in
 * memory): per route, the requests/min and tokens/min bucket levels as of `updated_at` (null: full), and
 * the 429 park. The capacities are the configuration's, passed with each statement (db/rate-limits.ts).
 */
export const rateLimits = pgTable('llm_rate_limits', {
  model: text('model').primaryKey(),
  requests_level: doublePrecision('requests_level'),
  tokens_level: doublePrecision('tokens_level'),
  updated_at: int8('updated_at').notNull(),
  parked_until: int8('parked_until').notNull().default(0),
});

export const mutations = pgTable(
  'mutations',
  {
    id: text('id').primaryKey(),
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
    created_at: int8('created_at').notNull(),
    response_seq: int8('response_seq'),
  },
  (t) => [index('idx_mutations_response').on(t.response_seq).where(sql`response_seq IS NOT NULL`)],
);

export const locks = pgTable('locks', {
  scope: text('scope').primaryKey(),
  owner: text('owner').notNull(),
  acquired_at: int8('acquired_at').notNull(),
  expires_at: int8('expires_at'),
});

export const charges = pgTable(
  'llm_charges',
  {
    id: text('id').primaryKey(),
    work_item_id: text('work_item_id')
      .notNull()
      .references(() => workItems.id),
    thread_id: text('thread_id')
      .notNull()
      .references(() => threads.id),
    project_id: text('project_id').notNull(),
    model: text('model').notNull(),
    attempt: integer('attempt').notNull(),
    repair: integer('repair').notNull(),
    status: text('status').notNull(),
    day: text('day').notNull(),
    reserved_tokens: integer('reserved_tokens').notNull(),
    reserved_cost_usd: doublePrecision('reserved_cost_usd').notNull(),
    prompt_tokens: integer('prompt_tokens'),
    completion_tokens: integer('completion_tokens'),
    total_tokens: integer('total_tokens'),
    cost_usd: doublePrecision('cost_usd'),
    response_seq: int8('response_seq'),
    created_at: int8('created_at').notNull(),
    settled_at: int8('settled_at'),
    outcome: text('outcome'),
    http_status: integer('http_status'),
    latency_ms: integer('latency_ms'),
    provider_request_id: text('provider_request_id'),
  },
  (t) => [
    uniqueIndex('uq_charges_response').on(t.response_seq).where(sql`response_seq IS NOT NULL`),
    uniqueIndex('uq_charges_open_reservation').on(t.work_item_id).where(sql`status = 'reserved'`),
    index('idx_charges_project_day').on(t.project_id, t.day),
    index('idx_charges_thread').on(t.thread_id),
    statusCheck('llm_charges', t.status, CHARGE_STATUSES),
  ],
);

/**
 * Per project and UTC day, what budgets count. With several daemons, a reservation locks its row
 * (`FOR UPDATE`, after an `INSERT … ON CONFLICT DO NOTHING` creates it) so two daemons cannot both read
 * the same spend and together overshoot the budget.
 */
export const projectSpend = pgTable(
  'llm_project_spend',
  {
    project_id: text('project_id').notNull(),
    day: text('day').notNull(),
    tokens: int8('tokens').notNull(),
    cost_usd: doublePrecision('cost_usd').notNull(),
  },
  (t) => [primaryKey({ columns: [t.project_id, t.day] })],
);

export const responseCache = pgTable('llm_response_cache', {
  request_hash: text('request_hash').primaryKey(),
  prompt_seq: int8('prompt_seq').notNull(),
  response_seq: int8('response_seq').notNull(),
  created_at: int8('created_at').notNull(),
});

export const ledgerImports = pgTable(
  'llm_ledger_imports',
  {
    seq: int8('seq').primaryKey(),
    import_id: text('import_id').notNull(),
    source_seq: int8('source_seq').notNull(),
    source_prev_hash: text('source_prev_hash').notNull(),
    source_hash: text('source_hash').notNull(),
  },
  (t) => [index('idx_ledger_imports_import').on(t.import_id)],
);

export const ledgerCheckpoints = pgTable('llm_ledger_checkpoints', {
  from_seq: int8('from_seq').primaryKey(),
  to_seq: int8('to_seq').notNull(),
  hash_before: text('hash_before').notNull(),
  hash_after: text('hash_after').notNull(),
  prune_id: text('prune_id').notNull(),
  cutoff_at: int8('cutoff_at').notNull(),
  created_at: int8('created_at').notNull(),
});

/**
 * The daemons sharing this database, each with the limits it enforces (budgets, prices, rate limits) as
 * canonical JSON and its hash. A daemon whose limits differ from a live daemon's refuses to start
 * (db/daemon-registry.ts): the limits are enforced in the claim's transaction with each daemon's own
 * values, so two daemons with different budgets could together spend past the stricter one. A row is
 * live while its daemon renews `seen_at`; a killed daemon's row lapses after one lease. `claiming` (1 or 0),
 * written with each renewal, says whether the daemon claims bulk work now: only those own projects
 * (domain/project-owners.ts), so one paused by pressure or stopping leaves its projects to the others.
 */
export const daemons = pgTable('llm_daemons', {
  owner: text('owner').primaryKey(),
  settings_hash: text('settings_hash').notNull(),
  settings: text('settings').notNull(),
  started_at: int8('started_at').notNull(),
  seen_at: int8('seen_at').notNull(),
  claiming: integer('claiming').notNull().default(1),
});
