/**
 * The database schema (drizzle). Migrations in `migrations/` are generated from this file by
 * `npm run db:generate`; hand-written migrations (triggers) live next to them.
 *
 * Conventions: ids are text (UUIDs), times are integer milliseconds since the epoch, JSON is stored as
 * text. Property names equal column names so that rows read with plain prepared statements have
 * exactly the inferred types below.
 */
import { sql } from 'drizzle-orm';
import { index, integer, primaryKey, real, sqliteTable, text, uniqueIndex } from 'drizzle-orm/sqlite-core';

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
    /** The whole content as JSON; for a document stored in parts, its head (`parts_field` set to []). */
    content: text('content').notNull(),
    updated_at: integer('updated_at').notNull(),
    /**
     * Null: stored whole. Else `content[parts_field]` is stored in `document_parts`, one row per element,
     * each named by its `parts_key` field (domain/document-parts.ts).
     */
    parts_field: text('parts_field'),
    parts_key: text('parts_key'),
    /** The characters of the parts' JSON texts together (the document's size without reading them). */
    parts_chars: integer('parts_chars').notNull().default(0),
  },
  (t) => [uniqueIndex('uq_documents_project_type_key').on(t.project_id, t.doc_type, t.doc_key)],
);

/** The elements of documents stored in parts, in `ord` order (numbers between their neighbours'). */
export const documentParts = sqliteTable(
  'document_parts',
  {
    document_id: text('document_id')
      .notNull()
      .references(() => documents.id),
    part_key: text('part_key').notNull(),
    ord: real('ord').notNull(),
    content: text('content').notNull(),
    /** The document version that wrote this part's content (a cached older version reads only the parts after it). */
    version: integer('version').notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.document_id, t.part_key] }), index('idx_document_parts_ord').on(t.document_id, t.ord)],
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
    /**
     * `work`: the thread's work items call the model. `orchestration`: a parent whose children do the
     * calls; it holds its operation's lock until every child ended. Set at creation, never changed.
     */
    role: text('role').notNull().default('work'),
    /** The operation's input (JSON, valid against its `input` schema): what its work items are built from. */
    input: text('input').notNull().default('{}'),
    created_by: text('created_by'),
    /**
     * The W3C trace context of the command that created the thread (`00-<trace id>-<span id>-<flags>`):
     * its log lines, its calls' `traceparent` headers and its exported spans belong to this trace.
     */
    traceparent: text('traceparent'),
    created_at: integer('created_at').notNull(),
    closed_at: integer('closed_at'),
  },
  (t) => [
    // At most one active thread per semantic request: the database settles double submits.
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
    // `threads --active` stays fast however many closed threads accumulate.
    index('idx_threads_active').on(t.created_at).where(sql`status IN ('open', 'running')`),
    // Failed and canceled threads are few among many complete ones: listing them (the dashboard's and
    // the API's `status` filter) walks only them, however many threads completed.
    index('idx_threads_ended_badly').on(t.created_at).where(sql`status IN ('failed', 'canceled')`),
    // Listing one kind (an operation's threads) newest first, at any database size.
    index('idx_threads_kind_created').on(t.kind, t.created_at),
    // Short ids are the random tail of the UUIDv7 (db/id-prefix.ts): a range scan finds a typed tail.
    index('idx_threads_id_tail').on(sql`substr(${t.id}, 25)`),
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
    /**
     * 1 once an answer that failed the schema escalated the item (config `on_invalid.escalate_to`): its
     * next calls go to the stronger model, with the errors. Part of the same attempt, never reset.
     */
    escalated: integer('escalated').notNull().default(0),
    lock_scope: text('lock_scope').notNull(),
    /** The thread's project (llm_threads.space_id), copied so the fair scheduler can rotate projects by index. */
    project_id: text('project_id').notNull().default(''),
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
    index('idx_work_items_claimable').on(t.priority, t.not_before, t.lock_scope).where(sql`status = 'queued'`),
    // The fair scheduler reads, per project and priority, the oldest queued item (see listClaimHeads).
    index('idx_work_items_fair').on(t.project_id, t.priority, t.not_before).where(sql`status = 'queued'`),
    // Deadline sweeps read only queued items that have a deadline.
    index('idx_work_items_deadline').on(t.deadline_at).where(sql`status = 'queued' AND deadline_at IS NOT NULL`),
    // Budget-parked items only: unparking runs after every settled call and must not read the queue.
    index('idx_work_items_parked').on(t.project_id).where(sql`status = 'queued' AND error_code = 'BUDGET_EXCEEDED'`),
    // The recovery scan reads only leased items, by expiry.
    index('idx_work_items_leased').on(t.lease_expires_at).where(sql`status IN ('claimed', 'running')`),
    index('idx_work_items_id_tail').on(sql`substr(${t.id}, 25)`),
  ],
);

/**
 * How many work items are queued, as one row kept exact by triggers on llm_work_items (migration
 * 0009): backpressure checks it on every command, and `count(*)` over the queue grew with the queue
 * (~15% of a command's CPU at 30,000 queued). Derived data: the triggers change it in the same
 * transaction as the item, so it cannot drift from the table.
 */
export const queueDepth = sqliteTable('llm_queue_depth', {
  id: integer('id').primaryKey(),
  queued: integer('queued').notNull(),
});

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
  (t) => [index('idx_ledger_thread').on(t.thread_id, t.seq), index('idx_ledger_work_item').on(t.work_item_id, t.seq)],
);

export const mutations = sqliteTable(
  'mutations',
  {
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
    /**
     * The recorded answer this mutation applied, as its charge names it: the `response` entry's seq, or
     * for a replayed answer the original paid call's (`replay_of`). A charge whose `response_seq` no
     * mutation names was wasted (usage's `wasted_calls`); null when the answer had no charge to name.
     */
    response_seq: integer('response_seq'),
  },
  (t) => [
    // Usage sums ask, per settled charge, whether a mutation applied its answer.
    index('idx_mutations_response').on(t.response_seq).where(sql`response_seq IS NOT NULL`),
  ],
);

export const locks = sqliteTable('locks', {
  scope: text('scope').primaryKey(),
  owner: text('owner').notNull(),
  acquired_at: integer('acquired_at').notNull(),
  /** Null: held until released (orchestration locks); otherwise reclaimable after this time. */
  expires_at: integer('expires_at'),
});

/**
 * One row per provider call (a charge): reserved in the claim's transaction before the call, settled
 * from the `response` entry in the transaction that records it, or released / kept `in_doubt` when the
 * call failed. Budgets and `combine usage` read this table; it is correctness data. It also carries the
 * call's telemetry (outcome, HTTP status, latency, provider request id), set by the same change that
 * settles or closes it. Whether a settled call's answer was applied is not stored here: a mutation
 * names the answer it applied (`mutations.response_seq`), in the transaction that applies it.
 *
 *   reserved  the call may be in flight: counts its estimated maximum (prompt + max_tokens)
 *   settled   the provider answered: counts the answer's usage (copied from the response entry)
 *   in_doubt  the outcome is unknown (INTERRUPTED, timeout, no usage reported): counts the maximum
 *   released  the provider certainly did not bill (an HTTP error answer, never sent): counts nothing
 */
export const charges = sqliteTable(
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
    /** UTC day (YYYY-MM-DD) of the reservation: the day budgets charge it to. */
    day: text('day').notNull(),
    reserved_tokens: integer('reserved_tokens').notNull(),
    reserved_cost_usd: real('reserved_cost_usd').notNull(),
    prompt_tokens: integer('prompt_tokens'),
    completion_tokens: integer('completion_tokens'),
    total_tokens: integer('total_tokens'),
    cost_usd: real('cost_usd'),
    /** The `response` ledger entry this charge was settled from; unique, so a response is never counted twice. */
    response_seq: integer('response_seq'),
    created_at: integer('created_at').notNull(),
    settled_at: integer('settled_at'),
    // The call's telemetry, written by the change that ends the call (settle or close), null while
    // reserved and for a lease that never sent its request: what llm_call_records held before
    // migration 0017, one row less per call. Execution never reads it.
    /** `ok` for an answer recorded, else the error's code (TIMEOUT, HTTP_500, …); null if no call was made. */
    outcome: text('outcome'),
    http_status: integer('http_status'),
    latency_ms: integer('latency_ms'),
    provider_request_id: text('provider_request_id'),
  },
  (t) => [
    uniqueIndex('uq_charges_response').on(t.response_seq).where(sql`response_seq IS NOT NULL`),
    // A work item holds at most one open reservation: the one of its current lease.
    uniqueIndex('uq_charges_open_reservation').on(t.work_item_id).where(sql`status = 'reserved'`),
    index('idx_charges_project_day').on(t.project_id, t.day),
    index('idx_charges_thread').on(t.thread_id),
  ],
);

/**
 * What each project has spent or may have spent per UTC day, as budgets count it (settled calls at
 * their usage, reserved and in-doubt calls at their maximum). Derived from llm_charges and kept in
 * step with it in the same transactions, so a budget check reads a few rows instead of the history.
 */
export const projectSpend = sqliteTable(
  'llm_project_spend',
  {
    project_id: text('project_id').notNull(),
    day: text('day').notNull(),
    tokens: integer('tokens').notNull(),
    cost_usd: real('cost_usd').notNull(),
  },
  (t) => [primaryKey({ columns: [t.project_id, t.day] })],
);

/**
 * The response cache's index: the newest valid answer for each request hash (`sha256` of the endpoint
 * and the canonical request). Derived data: the ledger is the truth, so a hit is re-checked against the
 * ledger entries it names, and a seq that no longer exists is a miss. No foreign key, for that reason.
 */
export const responseCache = sqliteTable('llm_response_cache', {
  request_hash: text('request_hash').primaryKey(),
  prompt_seq: integer('prompt_seq').notNull(),
  response_seq: integer('response_seq').notNull(),
  created_at: integer('created_at').notNull(),
});

/**
 * Where an imported ledger entry came from: its seq, prev_hash and hash in the exporting home's chain.
 * With the entry's own fields these let anyone recompute the original hash (`combine ledger verify`).
 */
export const ledgerImports = sqliteTable(
  'llm_ledger_imports',
  {
    /** The entry's seq in this home's chain. */
    seq: integer('seq').primaryKey(),
    /** sha256 of the export file: importing the same file twice is recognised. */
    import_id: text('import_id').notNull(),
    source_seq: integer('source_seq').notNull(),
    source_prev_hash: text('source_prev_hash').notNull(),
    source_hash: text('source_hash').notNull(),
  },
  (t) => [index('idx_ledger_imports_import').on(t.import_id)],
);

export type ProjectRow = typeof projects.$inferSelect;
export type DocumentRow = typeof documents.$inferSelect;
export type DocumentPartRow = typeof documentParts.$inferSelect;
export type ThreadRow = typeof threads.$inferSelect;
export type WorkItemRow = typeof workItems.$inferSelect;
export type LedgerRow = typeof ledgerEntries.$inferSelect;
export type MutationRow = typeof mutations.$inferSelect;
export type LockRow = typeof locks.$inferSelect;
export type ChargeRow = typeof charges.$inferSelect;
export type ResponseCacheRow = typeof responseCache.$inferSelect;
export type LedgerImportRow = typeof ledgerImports.$inferSelect;

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
