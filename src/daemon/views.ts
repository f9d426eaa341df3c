/**
 * The public JSON shapes (design.md "CLI contract"). `--json` output is stable: add fields, never
 * rename or remove them.
 */
import { listResponseCostsForThread, sumThreadUsage, type UsageTotals } from '../db/charges.js';
import type { Sql } from '../core/sql.js';
import { listLedgerForThreadFamily } from '../ledger/store.js';
import { readParsedDocument } from '../db/document-cache.js';
import { getProject } from '../db/projects.js';
import { listImportsForThread } from '../ledger/imports-store.js';
import type { DocumentRow, LedgerImportRow, LedgerRow, ThreadRow, WorkItemRow } from '../db/schema.js';
import { countChildThreadsByStatus, listChildThreadsWithLatestError } from '../db/threads.js';
import { listWorkItemsForThread } from '../db/work-items.js';
import { parseStoryBacklog, STORY_BACKLOG } from '../domain/backlog.js';
import { summarizeLedgerEntry } from '../ledger/summary.js';
import type { TargetRef } from '../domain/operations.js';
import { EPIC_ARCHITECTURE, parseEpicArchitecture } from '../domain/project.js';

export interface ThreadView {
  thread_id: string;
  kind: string;
  status: string;
  target_ref: TargetRef;
  parent_thread_id: string | null;
  created_at: string;
  closed_at: string | null;
  /** Counts by status of an orchestration's children (non-zero counts only); null for other threads. */
  child_summary: Record<string, number> | null;
  /** Tokens and cost of the thread's provider calls (an orchestration's: its children's), wasted attempts included. */
  usage: UsageView;
}

/**
 * Usage as shown: a cost is null ("unpriced") when every call it sums had no price — never $0 for
 * calls that were paid at an unknown price; `unpriced_calls` says how many calls a cost leaves out.
 */
export interface UsageView
  extends Omit<UsageTotals, 'cost_usd' | 'wasted_cost_usd' | 'in_doubt_cost_usd' | 'unpriced_wasted_calls' | 'unpriced_in_doubt_calls'> {
  cost_usd: number | null;
  wasted_cost_usd: number | null;
  in_doubt_cost_usd: number | null;
}

/** Costs are sums of floats: rounded to a millionth of a dollar for display and JSON. */
export function usageView(u: UsageTotals): UsageView {
  const { unpriced_wasted_calls, unpriced_in_doubt_calls, ...shown } = u;
  const usd = (n: number, calls: number, unpriced: number) => (calls > 0 && unpriced === calls ? null : Math.round(n * 1e6) / 1e6);
  return {
    ...shown,
    cost_usd: usd(u.cost_usd, u.calls, u.unpriced_calls),
    wasted_cost_usd: usd(u.wasted_cost_usd, u.wasted_calls, unpriced_wasted_calls),
    in_doubt_cost_usd: usd(u.in_doubt_cost_usd, u.in_doubt_calls, unpriced_in_doubt_calls),
  };
}

export interface CommandView {
  thread_id: string;
  status: string;
  deduplicated: boolean;
  /** A forced request replaced this thread, whose call had not started (it ended canceled, SUPERSEDED). */
  superseded_thread_id?: string;
}

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export async function threadView(sql: Sql, t: ThreadRow): Promise<ThreadView> {
  let child_summary: Record<string, number> | null = null;
  if (t.role === 'orchestration') {
    child_summary = {};
    for (const c of await countChildThreadsByStatus(sql, t.id)) child_summary[c.status] = c.n;
  }
  return {
    thread_id: t.id,
    kind: t.kind,
    status: t.status,
    target_ref: JSON.parse(t.target_ref) as TargetRef,
    parent_thread_id: t.parent_thread_id,
    created_at: iso(t.created_at)!,
    closed_at: iso(t.closed_at),
    child_summary,
    usage: usageView(await sumThreadUsage(sql, t.id)),
  };
}

export function workItemView(w: WorkItemRow) {
  return {
    work_item_id: w.id,
    sequence: w.sequence,
    status: w.status,
    attempt: w.attempt,
    max_attempts: w.max_attempts,
    repair_count: w.repair_count,
    lock_scope: w.lock_scope,
    not_before: iso(w.not_before),
    deadline_at: iso(w.deadline_at),
    error_code: w.error_code,
    error_message: w.error_message,
    started_at: iso(w.started_at),
    finished_at: iso(w.finished_at),
  };
}

/** Children listed with a thread (an orchestration has one per epic; more are counted, not listed). */
const MAX_CHILDREN_LISTED = 10_000;

/** A child of an orchestration as listed under it: where it stands, and why it failed if it did. */
export async function childViews(sql: Sql, parentId: string) {
  return (await listChildThreadsWithLatestError(sql, parentId, MAX_CHILDREN_LISTED)).map((c) => ({
    thread_id: c.id,
    kind: c.kind,
    status: c.status,
    target_ref: JSON.parse(c.target_ref) as TargetRef,
    error_code: c.error_code,
    error_message: c.error_message,
    closed_at: iso(c.closed_at),
  }));
}

/** The thread plus what a person wants to see about it: its work items. */
export async function threadDetailView(sql: Sql, t: ThreadRow) {
  return { ...(await threadView(sql, t)), work_items: (await listWorkItemsForThread(sql, t.id)).map(workItemView) };
}

/** `costs`: settled cost by response seq; a `response` entry shows its own (null when unpriced or in doubt). */
export function ledgerEntryView(e: LedgerRow, imported?: LedgerImportRow, costs?: Map<number, number | null>) {
  const payload = JSON.parse(e.payload) as Record<string, unknown>;
  const cost = costs?.get(e.seq);
  return {
    seq: e.seq,
    thread_id: e.thread_id,
    work_item_id: e.work_item_id,
    entry_type: e.entry_type,
    attempt: e.attempt,
    created_at: iso(e.created_at),
    summary: summarizeLedgerEntry(e.entry_type, payload),
    payload,
    prev_hash: e.prev_hash,
    hash: e.hash,
    ...(e.entry_type === 'response' ? { cost_usd: cost == null ? null : Math.round(cost * 1e6) / 1e6 } : {}),
    // Present only for entries imported from another home: their place in that home's chain.
    ...(imported ? { imported_from: { seq: imported.source_seq, prev_hash: imported.source_prev_hash, hash: imported.source_hash } } : {}),
  };
}

/** Entries `ledger <thread>` answers with at most: a bigger orchestration is read child by child, or exported. */
export const MAX_LEDGER_VIEW_ENTRIES = 20_000;

/** A thread's ledger entries and, for an orchestration, its children's, in chain order; null when there are too many. */
export async function threadLedgerView(sql: Sql, threadId: string) {
  const entries = await listLedgerForThreadFamily(sql, threadId, MAX_LEDGER_VIEW_ENTRIES + 1);
  if (entries.length > MAX_LEDGER_VIEW_ENTRIES) return null;
  const threadIds = [...new Set(entries.map((e) => e.thread_id))];
  const imports = new Map<number, LedgerImportRow>();
  const costs = new Map<number, number | null>();
  for (const id of threadIds) {
    for (const i of await listImportsForThread(sql, id)) imports.set(i.seq, i);
    for (const c of await listResponseCostsForThread(sql, id)) costs.set(c.response_seq, c.cost_usd);
  }
  return entries.map((e) => ledgerEntryView(e, imports.get(e.seq), costs));
}

export async function backlogView(sql: Sql, projectId: string) {
  const project = await getProject(sql, projectId);
  const doc = await readParsedDocument(sql, projectId, STORY_BACKLOG, parseStoryBacklog);
  if (!project || !doc) return null;
  const backlog = doc.value;
  const epics = (await readParsedDocument(sql, projectId, EPIC_ARCHITECTURE, parseEpicArchitecture))?.value.epics ?? [];
  return {
    project_id: project.id,
    project_name: project.name,
    version: doc.version,
    updated_at: iso(doc.updated_at),
    epics: epics.map((e) => {
      const generated = backlog.epics.find((b) => b.epic_id === e.id);
      return {
        epic_id: e.id,
        title: e.title,
        stories: generated?.stories ?? [],
        thread_id: generated?.thread_id ?? null,
        generated_at: iso(generated?.generated_at ?? null),
      };
    }),
  };
}

export async function projectView(sql: Sql, projectId: string) {
  const project = await getProject(sql, projectId);
  if (!project) return null;
  const arch = await readParsedDocument(sql, projectId, EPIC_ARCHITECTURE, parseEpicArchitecture);
  const epics = arch?.value.epics ?? [];
  return {
    project_id: project.id,
    name: project.name,
    created_at: iso(project.created_at),
    architecture_version: arch?.version ?? null,
    epics,
  };
}

/** `combine doc`: any document, its content as stored (JSON). */
export function documentView(doc: DocumentRow) {
  return {
    project_id: doc.project_id,
    doc_type: doc.doc_type,
    key: doc.doc_key === '' ? null : doc.doc_key,
    version: doc.version,
    content: JSON.parse(doc.content) as unknown,
    updated_at: iso(doc.updated_at)!,
  };
}
export type DocumentView = ReturnType<typeof documentView>;

/** A document in a project's list: which one, its version and when it changed (no content). */
export function documentHeadView(doc: Pick<DocumentRow, 'project_id' | 'doc_type' | 'doc_key' | 'version' | 'updated_at'>) {
  return {
    project_id: doc.project_id,
    doc_type: doc.doc_type,
    key: doc.doc_key === '' ? null : doc.doc_key,
    version: doc.version,
    updated_at: iso(doc.updated_at)!,
  };
}
