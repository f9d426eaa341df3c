/**
 * The ledger export format (JSONL) and its verification. Pure: rows in, lines out; text in, a verified
 * slice or the first problem out. See docs/design-notes.md "Ledger export".
 *
 *   {"record":"header","format":"combine-ledger-export","version":1,"scope":{…},"source":{"head_seq","head_hash"},"exported_at"}
 *   {"record":"thread", …llm_threads row}          parents before children
 *   {"record":"work_item", …llm_work_items row}
 *   {"record":"entry","seq","thread_id","work_item_id","entry_type","attempt","created_at","payload","prev_hash","hash"}
 *   {"record":"end","threads","work_items","entries","digest"}
 *
 * `payload` is the stored canonical JSON text, as a string: the exact bytes that were hashed. An
 * exported slice is not a contiguous chain (other threads' entries sit between), so each entry carries
 * its own `prev_hash`: its hash can be recomputed from the line alone, and where two exported entries
 * are neighbours in the source chain (seq n and n+1) the link between them is checked too. `digest`
 * (sha256 of every line before `end`) detects truncation and edits outside entries.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { ledgerEntryHash } from './chain.js';
import { TERMINAL_THREAD_STATUSES, TERMINAL_WORK_ITEM_STATUSES } from '../domain/states.js';
import { canonicalJson } from '../domain/canonical-json.js';

export const EXPORT_FORMAT = 'combine-ledger-export';
export const EXPORT_VERSION = 1;

const hex64 = z.string().regex(/^[0-9a-f]{64}$/, 'must be 64 hex digits');

const headerSchema = z.object({
  record: z.literal('header'),
  format: z.literal(EXPORT_FORMAT),
  version: z.literal(EXPORT_VERSION),
  scope: z.object({ thread_id: z.string().optional(), project_id: z.string().optional() }),
  source: z.object({ head_seq: z.number().int().min(0), head_hash: hex64.nullable() }),
  exported_at: z.string(),
});

const threadSchema = z.object({
  record: z.literal('thread'),
  id: z.string().min(1),
  kind: z.string().min(1),
  space_type: z.string(),
  space_id: z.string(),
  target_ref: z.string(),
  status: z.enum(TERMINAL_THREAD_STATUSES as unknown as [string, ...string[]]),
  parent_thread_id: z.string().nullable(),
  idempotency_key: z.string(),
  // Absent in exports written before operations were definitions: a thread then was a work thread
  // unless it had no work item, and its input was its target_ref without doc_type (see importLedger).
  role: z.string().optional(),
  input: z.string().optional(),
  created_by: z.string().nullable(),
  // Absent in exports written before trace ids and escalation existed.
  traceparent: z.string().nullable().optional(),
  created_at: z.number().int(),
  closed_at: z.number().int().nullable(),
});

const int = z.number().int();
const workItemSchema = z.object({
  record: z.literal('work_item'),
  id: z.string().min(1),
  thread_id: z.string().min(1),
  project_id: z.string().min(1),
  sequence: int,
  status: z.enum(TERMINAL_WORK_ITEM_STATUSES as unknown as [string, ...string[]]),
  attempt: int,
  max_attempts: int,
  repair_count: int,
  escalated: int.optional(),
  lock_scope: z.string(),
  priority: int,
  not_before: int,
  deadline_at: int.nullable(),
  lease_owner: z.string().nullable(),
  lease_expires_at: int.nullable(),
  error_code: z.string().nullable(),
  error_message: z.string().nullable(),
  created_at: int,
  started_at: int.nullable(),
  finished_at: int.nullable(),
});

const entrySchema = z.object({
  record: z.literal('entry'),
  seq: z.number().int().min(1),
  thread_id: z.string().min(1),
  work_item_id: z.string().nullable(),
  entry_type: z.string().min(1),
  attempt: z.number().int().nullable(),
  created_at: z.number().int(),
  payload: z.string(),
  prev_hash: hex64,
  hash: hex64,
});

const endSchema = z.object({
  record: z.literal('end'),
  threads: z.number().int(),
  work_items: z.number().int(),
  entries: z.number().int(),
  digest: hex64,
});

export type ExportHeader = z.infer<typeof headerSchema>;
export type ExportedThread = z.infer<typeof threadSchema>;
export type ExportedWorkItem = z.infer<typeof workItemSchema>;
export type ExportedEntry = z.infer<typeof entrySchema>;

export interface ExportSlice {
  header: ExportHeader;
  threads: ExportedThread[];
  workItems: ExportedWorkItem[];
  entries: ExportedEntry[];
  /** sha256 of the file's lines before `end`: identifies this export. */
  digest: string;
  /** Entries whose link to the previous exported entry was checked (seq n+1 after n). */
  linked: number;
}

export type VerifyExportResult = { ok: true; slice: ExportSlice } | { ok: false; malformed: boolean; line: number; seq: number | null; reason: string };

function digestOf(lines: readonly string[]): string {
  const h = createHash('sha256');
  for (const l of lines) h.update(l).update('\n');
  return h.digest('hex');
}

/** Serializes a slice: header, threads, work items, entries, then the `end` line with counts and digest. */
export function buildExportLines(p: {
  header: Omit<ExportHeader, 'record' | 'format' | 'version'>;
  threads: Omit<ExportedThread, 'record'>[];
  workItems: Record<string, unknown>[];
  entries: Omit<ExportedEntry, 'record'>[];
}): string[] {
  const lines = [
    JSON.stringify({ record: 'header', format: EXPORT_FORMAT, version: EXPORT_VERSION, ...p.header }),
    ...p.threads.map((t) => JSON.stringify({ record: 'thread', ...t })),
    ...p.workItems.map((w) => JSON.stringify({ record: 'work_item', ...w })),
    ...p.entries.map((e) => JSON.stringify({ record: 'entry', ...e })),
  ];
  lines.push(JSON.stringify({ record: 'end', threads: p.threads.length, work_items: p.workItems.length, entries: p.entries.length, digest: digestOf(lines) }));
  return lines;
}

function issue(error: z.ZodError): string {
  const first = error.issues[0]!;
  return `${first.path.join('.') || '(line)'}: ${first.message}`;
}

/**
 * Parses and verifies an export file's text. `malformed` failures (not an export, bad JSON, a line of
 * the wrong shape) are bad input; the others are integrity failures that name the first bad entry.
 */
export function verifyExport(text: string): VerifyExportResult {
  const lines = text.split('\n');
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop();
  const bad = (line: number, reason: string, seq: number | null = null, malformed = false) => ({ ok: false as const, malformed, line, seq, reason });
  const parsed: unknown[] = [];
  for (const [i, l] of lines.entries()) {
    try {
      parsed.push(JSON.parse(l));
    } catch {
      return bad(i + 1, 'not a JSON line', null, true);
    }
  }
  const header = headerSchema.safeParse(parsed[0]);
  if (!header.success) return bad(1, `not a combine ledger export (${issue(header.error)})`, null, true);
  const end = endSchema.safeParse(parsed.at(-1));
  if (lines.length < 2 || !end.success) return bad(lines.length, 'the file is truncated: its last line is not the `end` line');

  const slice: ExportSlice = { header: header.data, threads: [], workItems: [], entries: [], digest: end.data.digest, linked: 0 };
  for (let i = 1; i < parsed.length - 1; i++) {
    const kind = (parsed[i] as { record?: unknown })?.record;
    const schema = kind === 'thread' ? threadSchema : kind === 'work_item' ? workItemSchema : kind === 'entry' ? entrySchema : null;
    if (!schema) return bad(i + 1, `unknown record ${JSON.stringify(kind)}`, null, true);
    const r = schema.safeParse(parsed[i]);
    if (!r.success) return bad(i + 1, `invalid ${kind} line: ${issue(r.error)}`, (parsed[i] as { seq?: number }).seq ?? null, true);
    if (kind === 'thread') slice.threads.push(r.data as ExportedThread);
    else if (kind === 'work_item') slice.workItems.push(r.data as ExportedWorkItem);
    else slice.entries.push(r.data as ExportedEntry);
  }
  const counts = [slice.threads.length, slice.workItems.length, slice.entries.length];
  if (counts.join() !== [end.data.threads, end.data.work_items, end.data.entries].join()) {
    return bad(
      lines.length,
      `the end line counts ${end.data.threads}/${end.data.work_items}/${end.data.entries} threads/work items/entries, the file has ${counts.join('/')}`,
    );
  }

  const threads = new Set<string>();
  for (const [i, t] of slice.threads.entries()) {
    // Parents come first; a parent that is not in the file at all is dropped on import.
    if (t.parent_thread_id !== null && !threads.has(t.parent_thread_id) && slice.threads.some((p) => p.id === t.parent_thread_id)) {
      return bad(2 + i, `thread ${t.id} comes before its parent`, null, true);
    }
    threads.add(t.id);
  }
  const items = new Map(slice.workItems.map((w) => [w.id, w.thread_id]));
  for (const [i, w] of slice.workItems.entries()) {
    if (!threads.has(w.thread_id))
      return bad(2 + slice.threads.length + i, `work item ${w.id} belongs to thread ${w.thread_id}, which is not in the file`, null, true);
  }

  const firstEntryLine = 2 + slice.threads.length + slice.workItems.length;
  let prev: ExportedEntry | null = null;
  for (const [i, e] of slice.entries.entries()) {
    const at = (reason: string) => bad(firstEntryLine + i, `entry ${e.seq}: ${reason}`, e.seq);
    if (prev && e.seq <= prev.seq) return at(`out of order (after entry ${prev.seq})`);
    if (!threads.has(e.thread_id)) return at(`its thread ${e.thread_id} is not in the file`);
    if (e.work_item_id !== null && items.get(e.work_item_id) !== e.thread_id)
      return at(`its work item ${e.work_item_id} is not in the file under thread ${e.thread_id}`);
    let canonical: string;
    try {
      canonical = canonicalJson(JSON.parse(e.payload));
    } catch {
      return at('the payload is not JSON');
    }
    if (canonical !== e.payload) return at('the payload is not in canonical form, so it is not the text that was hashed');
    if (ledgerEntryHash(e) !== e.hash) return at('hash does not match the entry contents');
    if (prev && e.seq === prev.seq + 1) {
      if (e.prev_hash !== prev.hash) return at('prev_hash does not match the previous entry');
      slice.linked++;
    }
    if (e.seq === header.data.source.head_seq && e.hash !== header.data.source.head_hash) return at('hash differs from the chain head the header names');
    prev = e;
  }
  // Last, so that a changed entry is reported by its seq rather than as a changed file.
  if (digestOf(lines.slice(0, -1)) !== end.data.digest) return bad(lines.length, 'the digest does not match the file: lines were changed, added or removed');
  return { ok: true, slice };
}
