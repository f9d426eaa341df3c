/**
 * `combine ledger export` and `combine ledger import`: moving the record of finished threads between
 * homes (the format and its checks are in domain/ledger-export.ts).
 *
 * Import verifies the whole file before writing anything, then in one transaction adds the threads
 * and work items and appends each entry to this home's chain — same thread, work item, type, attempt,
 * time and payload bytes, new seq and hashes — recording its source seq, prev_hash and hash in
 * llm_ledger_imports, from which its original hash can be recomputed at any time. Imported threads keep
 * their ids but their idempotency key gets an `imported:` prefix: work applied to another home's
 * documents must never answer ("deduplicate") a request in this one.
 */
import { filterAsync, flatMapAsync } from '../core/async.js';
import type { Sql } from '../core/sql.js';
import { appendLedgerEntry, getLedgerHead, LEDGER_ENTRY_TYPES, listLedgerForThread, type LedgerEntryType } from './store.js';
import { hasImport, insertLedgerImport } from './imports-store.js';
import { getProject } from '../db/projects.js';
import type { LedgerRow, ThreadRow, WorkItemRow } from '../db/schema.js';
import { getThread, insertThread, listChildThreads, listThreadsForSpace } from '../db/threads.js';
import { insertWorkItem, listWorkItemsForThread } from '../db/work-items.js';
import { buildExportLines, verifyExport, type ExportedWorkItem } from './export-format.js';
import { isTerminalThread, TERMINAL_WORK_ITEM_STATUSES, type WorkItemStatus } from '../domain/states.js';
import { findUnstorableText } from '../domain/storable-text.js';
import type { Tx } from '../daemon/engine/tx.js';
import { CommandError } from '../core/errors.js';

export const IMPORTED_KEY_PREFIX = 'imported:';

export interface ExportResult {
  lines: string[];
  threads: number;
  work_items: number;
  entries: number;
  /** Threads left out because they are still open or running. */
  skipped: string[];
}

async function isFinished(sql: Sql, t: ThreadRow): Promise<boolean> {
  return isTerminalThread(t.status) && (await listWorkItemsForThread(sql, t.id)).every((w) => TERMINAL_WORK_ITEM_STATUSES.includes(w.status as WorkItemStatus));
}

async function threadsInScope(sql: Sql, scope: { threadId: string | null; projectId: string | null }): Promise<{ threads: ThreadRow[]; skipped: string[] }> {
  if (scope.threadId !== null) {
    const t = await getThread(sql, scope.threadId);
    if (!t) throw new CommandError('NOT_FOUND', `no thread "${scope.threadId}"`);
    const all = t.role === 'orchestration' ? [t, ...(await listChildThreads(sql, t.id))] : [t];
    const active = await filterAsync(all, async (x) => !(await isFinished(sql, x)));
    if (active.length > 0)
      throw new CommandError(
        'CONFLICT',
        `cannot export thread ${t.id}: ${active.map((x) => x.id).join(', ')} still ${active.length === 1 ? 'has' : 'have'} work in progress; export it when it ends`,
      );
    return { threads: all, skipped: [] };
  }
  const projectId = scope.projectId!;
  const all = await listThreadsForSpace(sql, projectId);
  if (all.length === 0 && !(await getProject(sql, projectId))) throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
  const finished = await filterAsync(all, (t) => isFinished(sql, t));
  return { threads: finished, skipped: all.filter((t) => !finished.includes(t)).map((t) => t.id) };
}

/** The export lines for one thread (an orchestration with its children) or every finished thread of a project. */
export async function exportLedger(sql: Sql, scope: { threadId: string | null; projectId: string | null }, now: number): Promise<ExportResult> {
  const { threads, skipped } = await threadsInScope(sql, scope);
  // Parents first, so an import can insert each thread after the one it points to.
  const ordered = [...threads.filter((t) => t.parent_thread_id === null), ...threads.filter((t) => t.parent_thread_id !== null)];
  const workItems = await flatMapAsync(ordered, (t) => listWorkItemsForThread(sql, t.id));
  const entries = (await flatMapAsync(ordered, (t) => listLedgerForThread(sql, t.id))).sort((a, b) => a.seq - b.seq);
  const head = await getLedgerHead(sql);
  const lines = buildExportLines({
    header: {
      scope: scope.threadId !== null ? { thread_id: scope.threadId } : { project_id: scope.projectId! },
      source: { head_seq: head?.seq ?? 0, head_hash: head?.hash ?? null },
      exported_at: new Date(now).toISOString(),
    },
    threads: ordered,
    workItems: workItems as unknown as Record<string, unknown>[],
    entries: entries.map((e: LedgerRow) => ({ ...e })),
  });
  return { lines, threads: ordered.length, work_items: workItems.length, entries: entries.length, skipped };
}

export interface ImportResult {
  result: 'imported' | 'already_imported';
  /** sha256 of the file's content lines (its `end.digest`). */
  import_id: string;
  threads: number;
  work_items: number;
  entries: number;
  /** Entries whose link to their exported neighbour was checked as well as their own hash. */
  linked: number;
  /** The imported entries' seqs in this home's chain. */
  first_seq: number | null;
  last_seq: number | null;
}

function workItemRow(w: ExportedWorkItem): WorkItemRow {
  const { record: _record, ...row } = w;
  return { ...row, escalated: row.escalated ?? 0, lease_owner: null, lease_expires_at: null };
}

/** Verifies an export file and, if every check holds, adds its threads and entries to this home. */
export async function importLedger(tx: Tx, text: string): Promise<ImportResult> {
  const verified = verifyExport(text);
  if (!verified.ok) {
    const where = verified.line > 0 ? `line ${verified.line}: ` : '';
    if (verified.malformed) throw new CommandError('BAD_REQUEST', `not a valid ledger export: ${where}${verified.reason}`);
    throw new CommandError('CONFLICT', `the export does not verify, nothing was imported: ${where}${verified.reason}`, 'VERIFY_FAILED');
  }
  const s = verified.slice;
  // The rows' own values (an entry's payload is JSON text, where a NUL is the escape `\u0000`): domain/storable-text.ts.
  const unstorable = findUnstorableText({ threads: s.threads, work_items: s.workItems, entries: s.entries });
  if (unstorable !== null) throw new CommandError('BAD_REQUEST', `not a valid ledger export: ${unstorable.path}: ${unstorable.problem}`);
  const base = { import_id: s.digest, threads: s.threads.length, work_items: s.workItems.length, entries: s.entries.length, linked: s.linked };
  if (await hasImport(tx.sql, s.digest)) return { result: 'already_imported', ...base, first_seq: null, last_seq: null };
  for (const e of s.entries) {
    if (!LEDGER_ENTRY_TYPES.includes(e.entry_type as LedgerEntryType))
      throw new CommandError('BAD_REQUEST', `entry ${e.seq}: unknown entry type "${e.entry_type}"`);
  }
  const inFile = new Set(s.threads.map((t) => t.id));
  for (const t of s.threads) {
    if (await getThread(tx.sql, t.id)) throw new CommandError('CONFLICT', `thread ${t.id} already exists in this home; nothing was imported`);
    const { record: _record, ...row } = t;
    const { doc_type: _docType, ...legacyInput } = JSON.parse(row.target_ref) as Record<string, unknown>;
    await insertThread(tx.sql, {
      ...row,
      parent_thread_id: row.parent_thread_id !== null && inFile.has(row.parent_thread_id) ? row.parent_thread_id : null,
      idempotency_key: `${IMPORTED_KEY_PREFIX}${row.idempotency_key}`,
      role: row.role ?? (s.workItems.some((w) => w.thread_id === row.id) ? 'work' : 'orchestration'),
      input: row.input ?? JSON.stringify(legacyInput),
      traceparent: row.traceparent ?? null,
    });
  }
  for (const w of s.workItems) await insertWorkItem(tx.sql, workItemRow(w));
  let first: number | null = null;
  let last: number | null = null;
  for (const e of s.entries) {
    const row = await appendLedgerEntry(tx.sql, {
      thread_id: e.thread_id,
      work_item_id: e.work_item_id,
      entry_type: e.entry_type as LedgerEntryType,
      attempt: e.attempt,
      payload: JSON.parse(e.payload),
      created_at: e.created_at,
    });
    // verifyExport checked the payload is canonical, so the bytes hashed here are the exported bytes.
    if (row.payload !== e.payload) throw new Error(`entry ${e.seq}: payload changed on re-canonicalization`);
    await insertLedgerImport(tx.sql, { seq: row.seq, import_id: s.digest, source_seq: e.seq, source_prev_hash: e.prev_hash, source_hash: e.hash });
    first ??= row.seq;
    last = row.seq;
  }
  return { result: 'imported', ...base, first_seq: first, last_seq: last };
}
