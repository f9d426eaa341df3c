/**
 * llm_ledger_entries: the append-only, hash-chained execution record. `appendLedgerEntry` is the only
 * way entries are written; triggers refuse UPDATE and DELETE in the database itself.
 */
import { createHash } from 'node:crypto';
import { LedgerLinkMismatchError } from '../core/errors.js';
import type { Sql } from '../core/sql.js';
import { canonicalMetadataAroundSeq, GENESIS_HASH, ledgerEntryHash } from './chain.js';
import type { LedgerRow } from '../db/schema.js';
import { inThreadAndChildren } from '../db/thread-and-children.js';
import { canonicalJson } from '../domain/canonical-json.js';

export const LEDGER_ENTRY_TYPES = ['prompt', 'response', 'parse_report', 'mutation_report', 'error'] as const;
export type LedgerEntryType = (typeof LEDGER_ENTRY_TYPES)[number];

export interface NewLedgerEntry {
  thread_id: string;
  work_item_id: string | null;
  entry_type: LedgerEntryType;
  attempt: number | null;
  payload: unknown;
  created_at: number;
}

/**
 * The chain's last link, or null for an empty ledger. When `combine prune` removed the newest entries,
 * the head is the last checkpoint's hash: seqs are never reused and the chain continues across the cut.
 * Postgres keeps the head in a row of its own (llm_ledger_head, moved by each append: migrations/pg/0013).
 */
export async function getLedgerHead(sql: Sql): Promise<{ seq: number; hash: string } | null> {
  if (sql.dialect === 'postgres') return headOf(await sql.get<{ seq: number; hash: string }>('SELECT seq, hash FROM llm_ledger_head WHERE id = 1'));
  return (await sqliteLedgerHead(sql)) ?? null;
}

/** SQLite's head: the newest entry or, past a prune of the newest entries, the last checkpoint. */
function sqliteLedgerHead(sql: Sql): Promise<{ seq: number; hash: string } | undefined> {
  return sql.get(`SELECT seq, hash FROM (
       SELECT * FROM (SELECT seq, hash FROM llm_ledger_entries ORDER BY seq DESC LIMIT 1)
       UNION ALL
       SELECT * FROM (SELECT to_seq AS seq, hash_after AS hash FROM llm_ledger_checkpoints ORDER BY from_seq DESC LIMIT 1))
     ORDER BY seq DESC LIMIT 1`);
}

/** The head row of Postgres (seq 0 until the first entry) as `getLedgerHead` answers. */
function headOf(row: { seq: number; hash: string } | undefined): { seq: number; hash: string } | null {
  return row && row.seq > 0 ? row : null;
}

/** The entry linked after (`seq - 1`, `prevHash`): its hash computed over everything else. */
function linkedRow(e: NewLedgerEntry, seq: number, prevHash: string): LedgerRow {
  const row: Omit<LedgerRow, 'hash'> = {
    seq,
    thread_id: e.thread_id,
    work_item_id: e.work_item_id,
    entry_type: e.entry_type,
    attempt: e.attempt,
    payload: canonicalJson(e.payload),
    prev_hash: prevHash,
    created_at: e.created_at,
  };
  return { ...row, hash: ledgerEntryHash(row) };
}

/**
 * Appends one entry at the head of the chain. The head is read (and on Postgres locked) inside the
 * caller's transaction, so links can neither fork nor skip.
 */
export function appendLedgerEntry(sql: Sql, e: NewLedgerEntry): Promise<LedgerRow> {
  return appendLedgerEntries(sql, [e]).then((rows) => rows[0]!);
}

/**
 * Rows per INSERT of a batch: a power of two up to 256 (9 parameters a row, well under both databases'
 * limits). Powers of two keep the statement texts to nine, so each is prepared once per connection
 * rather than one text per batch length.
 */
const MAX_ROWS_PER_INSERT = 256;
const insertTexts = new Map<number, string>();

function insertEntriesText(rows: number): string {
  let text = insertTexts.get(rows);
  if (text === undefined) {
    text = `INSERT INTO llm_ledger_entries (seq, thread_id, work_item_id, entry_type, attempt, payload, prev_hash, hash, created_at)
       VALUES ${Array.from({ length: rows }, () => '(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`;
    insertTexts.set(rows, text);
  }
  return text;
}

/** The largest power of two that is at most `n` and at most MAX_ROWS_PER_INSERT. */
function rowsPerInsert(n: number): number {
  let size = MAX_ROWS_PER_INSERT;
  while (size > n) size >>= 1;
  return size;
}

/**
 * Appends `entries`, in order, at the head of the chain, inside the caller's transaction, so links can
 * neither fork nor skip. SQLite: the head is read once, the links are computed here, and the rows go in
 * INSERTs of up to 256 — a bulk command (canceling a generate-all of 10,000 children) makes a few dozen
 * round trips, not two per entry; the triggers check each link again. Postgres: one statement per 1,000
 * entries locks the head (until the transaction ends), links and inserts them (appendAtPostgresHead); to
 * do that in the COMMIT's own query, appendLedgerEntriesAtCommit.
 */
export function appendLedgerEntries(sql: Sql, entries: readonly NewLedgerEntry[]): Promise<LedgerRow[]> {
  if (entries.length === 0) return Promise.resolve([]);
  if (sql.dialect === 'postgres') return appendAtPostgresHead(sql, entries);
  // SQLite has one writer: its transaction already excludes every other append. Chained rather than an
  // async function, and not through getLedgerHead (its `?? null`): an async frame per append showed in
  // the engine's CPU and allocation profiles.
  return sqliteLedgerHead(sql).then((head) => insertLinked(sql, entries, head));
}

/** Links `entries` after `head` and inserts them; one INSERT for a run of a power-of-two length (one entry, usually). */
function insertLinked(sql: Sql, entries: readonly NewLedgerEntry[], head: { seq: number; hash: string } | null | undefined): Promise<LedgerRow[]> {
  let seq = head?.seq ?? 0;
  let prevHash = head?.hash ?? GENESIS_HASH;
  const rows = entries.map((e) => {
    const row = linkedRow(e, ++seq, prevHash);
    prevHash = row.hash;
    return row;
  });
  if (rowsPerInsert(rows.length) === rows.length) return sql.run(insertEntriesText(rows.length), insertParams(rows)).then(() => rows);
  return insertInBatches(sql, rows);
}

async function insertInBatches(sql: Sql, rows: LedgerRow[]): Promise<LedgerRow[]> {
  for (let i = 0; i < rows.length; ) {
    const batch = rows.slice(i, i + rowsPerInsert(rows.length - i));
    i += batch.length;
    await sql.run(insertEntriesText(batch.length), insertParams(batch));
  }
  return rows;
}

/** The rows' values in the INSERT's order (one array, not `flatMap`'s array per row: it showed in the engine's profile). */
function insertParams(rows: readonly LedgerRow[]): (string | number | null)[] {
  const params: (string | number | null)[] = [];
  for (const r of rows) params.push(r.seq, r.thread_id, r.work_item_id, r.entry_type, r.attempt, r.payload, r.prev_hash, r.hash, r.created_at);
  return params;
}

/** Entries per call of the append function: a bulk append stays a few statements of bounded size. */
const MAX_ROWS_PER_CALL = 1000;

const APPEND_AT_HEAD = `SELECT entry_seq AS seq, entry_prev_hash AS prev_hash, entry_hash AS hash
   FROM llm_ledger_append(@thread_ids::text[], @work_item_ids::text[], @entry_types::text[], @attempts::integer[], @payloads::text[],
     @created_ats::bigint[], @meta_heads::text[], @meta_tails::text[], @content_digests::text[])
   ORDER BY entry_seq`;

type Link = { seq: number; prev_hash: string; hash: string };

/** An entry whose payload is its canonical JSON text. */
type CanonicalEntry = Omit<NewLedgerEntry, 'payload'> & { payload: string };

/** One call of llm_ledger_append (migrations/pg/0009): its parameters, and its entries (linked: `linkedRows`). */
interface AppendCall {
  params: Record<string, unknown[]>;
  /** The call's entries, their payloads in canonical JSON. */
  run: CanonicalEntry[];
}

/**
 * The calls that append `entries` at the Postgres head, up to 1,000 entries each. The database links
 * them and computes the hashes; with each entry goes the digest of the bytes it will hash (payload and
 * metadata around the seq), which the function checks before it links anything, so it can only ever
 * store a hash of the bytes ledgerEntryHash hashes (`ledger verify` recomputes them all in JavaScript).
 */
function appendCalls(entries: readonly NewLedgerEntry[]): AppendCall[] {
  const calls: AppendCall[] = [];
  // Loops: docs/design-notes.md "Closures made per call".
  for (let i = 0; i < entries.length; i += MAX_ROWS_PER_CALL) {
    const run: CanonicalEntry[] = [];
    const params = {
      thread_ids: [] as unknown[],
      work_item_ids: [] as unknown[],
      entry_types: [] as unknown[],
      attempts: [] as unknown[],
      payloads: [] as unknown[],
      created_ats: [] as unknown[],
      meta_heads: [] as unknown[],
      meta_tails: [] as unknown[],
      content_digests: [] as unknown[],
    };
    const end = Math.min(i + MAX_ROWS_PER_CALL, entries.length);
    for (let k = i; k < end; k++) {
      const entry = entries[k]!;
      // Written out rather than spread: one object of a fixed shape per entry (and no copy of the slice).
      const e: CanonicalEntry = {
        thread_id: entry.thread_id,
        work_item_id: entry.work_item_id,
        entry_type: entry.entry_type,
        attempt: entry.attempt,
        payload: canonicalJson(entry.payload),
        created_at: entry.created_at,
      };
      const around = canonicalMetadataAroundSeq(e);
      run.push(e);
      params.thread_ids.push(e.thread_id);
      params.work_item_ids.push(e.work_item_id);
      params.entry_types.push(e.entry_type);
      params.attempts.push(e.attempt);
      params.payloads.push(e.payload);
      params.created_ats.push(e.created_at);
      params.meta_heads.push(around[0]);
      params.meta_tails.push(around[1]);
      params.content_digests.push(linkedBytesDigest(e.payload, around));
    }
    calls.push({ params, run });
  }
  return calls;
}

/** A call's entries as the rows the database linked them into (`links`: its result, in the entries' order). */
function linkedRows(call: AppendCall, links: readonly Link[]): LedgerRow[] {
  if (links.length !== call.run.length) throw new LedgerLinkMismatchError(call.run.length, links.length);
  const rows: LedgerRow[] = [];
  for (let j = 0; j < call.run.length; j++) {
    const e = call.run[j]!;
    const link = links[j]!;
    // Written out, in the order a spread of the entry gave: a row of one fixed shape, no copy through a spread.
    rows.push({
      thread_id: e.thread_id,
      work_item_id: e.work_item_id,
      entry_type: e.entry_type,
      attempt: e.attempt,
      payload: e.payload,
      created_at: e.created_at,
      seq: link.seq,
      prev_hash: link.prev_hash,
      hash: link.hash,
    });
  }
  return rows;
}

/** sha256(payload ‖ "\n" ‖ meta_head ‖ "\n" ‖ meta_tail): what llm_ledger_append checks it received. */
function linkedBytesDigest(payload: string, [head, tail]: [string, string]): string {
  return createHash('sha256').update(payload).update('\n').update(head).update('\n').update(tail).digest('hex');
}

/** Postgres, now: each call locks the head (until the transaction ends), links and inserts its entries. */
async function appendAtPostgresHead(sql: Sql, entries: readonly NewLedgerEntry[]): Promise<LedgerRow[]> {
  const rows: LedgerRow[] = [];
  for (const call of appendCalls(entries)) rows.push(...linkedRows(call, await sql.all<Link>(APPEND_AT_HEAD, call.params)));
  return rows;
}

/**
 * Appends `entries`, in order, as the last statements of the caller's transaction. On a handle that runs
 * statements in its COMMIT's query (the Postgres writer's: `Sql.atCommit`), they go there, so the chain
 * head — the one row every appending transaction waits for — is held only for the server's statements and
 * the fsync, with no round trip to this process in between; `linked` gets the rows (and `context`) after the
 * COMMIT, before the write's events are published. Elsewhere they are appended now and `linked` gets them at once.
 */
export async function appendLedgerEntriesAtCommit<C>(
  sql: Sql,
  entries: readonly NewLedgerEntry[],
  linked: (rows: LedgerRow[], context: C) => void,
  context: C,
): Promise<void> {
  const atCommit = sql.atCommit;
  if (entries.length === 0 || !atCommit) {
    linked(await appendLedgerEntries(sql, entries), context);
    return;
  }
  const calls = appendCalls(entries);
  const rows: LedgerRow[] = [];
  for (const call of calls) {
    atCommit(APPEND_AT_HEAD, call.params, (links) => {
      rows.push(...linkedRows(call, links as Link[]));
      if (call === calls.at(-1)) linked(rows, context);
    });
  }
}

export function getLedgerEntry(sql: Sql, seq: number): Promise<LedgerRow | undefined> {
  return sql.get<LedgerRow>('SELECT * FROM llm_ledger_entries WHERE seq = ?', [seq]);
}

export async function listLedgerForThread(sql: Sql, threadId: string): Promise<LedgerRow[]> {
  return (await sql.all('SELECT * FROM llm_ledger_entries WHERE thread_id = ? ORDER BY seq', [threadId])) as LedgerRow[];
}

/** A thread's entries and its children's (an orchestration's whole record), in chain order; at most `limit` (-1: all). */
export async function listLedgerForThreadFamily(sql: Sql, threadId: string, limit = -1): Promise<LedgerRow[]> {
  return (await sql.all(
    `SELECT * FROM llm_ledger_entries
     WHERE thread_id ${inThreadAndChildren('@id')}
     ORDER BY seq LIMIT @limit`,
    // SQLite reads a negative LIMIT as none; Postgres refuses it and reads NULL as none.
    { id: threadId, limit: limit < 0 && sql.dialect === 'postgres' ? null : limit },
  )) as LedgerRow[];
}

/** The entries of a thread and its children after `afterSeq`, in seq order (a follow stream's re-read). */
export async function listLedgerForThreadFamilyAfter(sql: Sql, threadId: string, afterSeq: number): Promise<LedgerRow[]> {
  return (await sql.all(
    `SELECT * FROM llm_ledger_entries
     WHERE thread_id ${inThreadAndChildren('@id')} AND seq > @after
     ORDER BY seq`,
    { id: threadId, after: afterSeq },
  )) as LedgerRow[];
}

/** The work item's most recent entry: tells recovery how far an interrupted item got. */
export function getLastLedgerEntryForWorkItem(sql: Sql, workItemId: string): Promise<LedgerRow | undefined> {
  return sql.get<LedgerRow>('SELECT * FROM llm_ledger_entries WHERE work_item_id = ? ORDER BY seq DESC LIMIT 1', [workItemId]);
}

/** The work item's most recent entry of one type. */
export function getLastLedgerEntryOfType(sql: Sql, workItemId: string, type: LedgerEntryType): Promise<LedgerRow | undefined> {
  return sql.get<LedgerRow>('SELECT * FROM llm_ledger_entries WHERE work_item_id = ? AND entry_type = ? ORDER BY seq DESC LIMIT 1', [workItemId, type]);
}

/** The work item's newest entry of one type written before `seq`. */
export async function getLedgerEntryOfTypeBefore(sql: Sql, workItemId: string, type: LedgerEntryType, seq: number): Promise<LedgerRow | undefined> {
  return sql.get<LedgerRow>('SELECT * FROM llm_ledger_entries WHERE work_item_id = ? AND entry_type = ? AND seq < ? ORDER BY seq DESC LIMIT 1', [
    workItemId,
    type,
    seq,
  ]);
}

/** Rows read per page by the streaming readers below. */
const PAGE = 1000;

/**
 * Every entry in chain order, streamed (the ledger can be large): pages by seq (keyset), so no
 * statement stays open between pages and the same code runs on any backend.
 */
export async function* iterateLedger(sql: Sql): AsyncGenerator<LedgerRow> {
  for (let after = -1; ; ) {
    const page = await sql.all<LedgerRow>('SELECT * FROM llm_ledger_entries WHERE seq > ? ORDER BY seq LIMIT ?', [after, PAGE]);
    yield* page;
    if (page.length < PAGE) return;
    after = page.at(-1)!.seq;
  }
}

export async function countLedgerEntries(sql: Sql): Promise<number> {
  return ((await sql.get('SELECT count(*) AS n FROM llm_ledger_entries')) as { n: number }).n;
}

/** Applied work items with no mutation_report entry: a hole in the record of what was changed. */
export async function listAppliedWithoutMutationReport(sql: Sql): Promise<string[]> {
  return (
    (await sql.all(`SELECT w.id FROM llm_work_items w
       WHERE w.status = 'applied' AND NOT EXISTS (
         SELECT 1 FROM llm_ledger_entries l WHERE l.work_item_id = w.id AND l.entry_type = 'mutation_report')`)) as { id: string }[]
  ).map((r) => r.id);
}

export async function getLatestLedgerEntrySeqForThread(sql: Sql, threadId: string): Promise<number | null> {
  const row = (await sql.get('SELECT max(seq) AS seq FROM llm_ledger_entries WHERE thread_id = ?', [threadId])) as { seq: number | null };
  return row.seq;
}
