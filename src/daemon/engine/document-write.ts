/**
 * Storing a planned mutation's content as the target document's next version, inside the item's one
 * transaction: whole (one row), or in parts when the operation declares them (domain/document-parts.ts)
 * — then only the elements that changed are written, with the head row that carries the version.
 */
import type { Sql } from '../../core/sql.js';
import { OperationCallError } from '../../core/errors.js';
import { deleteDocumentParts, storedLayout, writeDocumentParts } from '../../db/document-parts.js';
import { insertDocument, updateDocumentContent, updateDocumentHead, type WriteHead } from '../../db/projects.js';
import { assembledChars, planParts, rewritePlan, splitDocument, type PartsPlan } from '../../domain/document-parts.js';
import { contentText, contentTooLarge, LIMITS, type PlannedMutation } from '../../operations/runtime.js';

export interface DocumentWrite {
  /** The operation (for errors). */
  operation: string;
  /** The document's row, locked; undefined: it does not exist yet. */
  head: WriteHead | undefined;
  /** The content `apply` was given: the stored version `head.version`, parsed. */
  current: unknown;
  planned: PlannedMutation;
  /** For a new document. */
  create: { id: string; project_id: string; doc_type: string; doc_key: string };
  now: number;
}

const sameLayout = (a: { field: string; key: string } | null, b: { field: string; key: string }) => a !== null && a.field === b.field && a.key === b.key;

/** The parts to write, or null to store it whole; a content that is not JSON fails its `apply` (nothing written yet). */
function planOf(w: DocumentWrite, split: NonNullable<PlannedMutation['split']>): PartsPlan | null {
  const stored = w.head ? storedLayout(w.head) : null;
  const previous = sameLayout(stored, split.layout) ? splitDocument(w.current, split.layout) : null;
  try {
    return planParts(previous, split.next, split.layout);
  } catch (err) {
    throw new OperationCallError(w.operation, 'apply', `must return JSON values (${(err as Error).message})`);
  }
}

/** The content as one JSON text (for a document stored whole), within the size limit. */
function wholeText(w: DocumentWrite): string {
  return w.planned.text ?? contentText(w.operation, w.planned.content);
}

async function writeWhole(sql: Sql, w: DocumentWrite): Promise<void> {
  const { head, now } = w;
  const content = wholeText(w);
  if (!head) return insertDocument(sql, { ...w.create, version: 1, content, updated_at: now });
  if (head.parts_field !== null) await deleteDocumentParts(sql, head.id);
  return updateDocumentContent(sql, { id: head.id, from_version: head.version, content, updated_at: now });
}

/** Writes the next version; throws OperationCallError (before writing) when the content is too large. */
export async function writeDocument(sql: Sql, w: DocumentWrite): Promise<void> {
  const { head, planned, now } = w;
  const plan = planned.split ? planOf(w, planned.split) : null;
  if (!planned.split || !plan) return writeWhole(sql, w);
  const { layout, next } = planned.split;
  const rewrite = () => rewritePlan(next, layout)!;
  const chars = plan.kind === 'rewrite' ? plan.chars : head!.parts_chars + plan.charsDelta;
  if (assembledChars(plan.head, chars, plan.count) > LIMITS.contentBytes) throw new OperationCallError(w.operation, 'apply', contentTooLarge());
  const columns = { content: plan.head, updated_at: now, parts_field: layout.field, parts_key: layout.key };
  if (!head) {
    // A new document's plan writes every part: its characters are known before.
    await insertDocument(sql, { ...w.create, version: 1, ...columns, parts_chars: chars });
    await writeDocumentParts(sql, w.create.id, plan, { version: 1, partsChars: 0, rewrite, headFollows: false });
    return;
  }
  const { partsChars, along } = await writeDocumentParts(sql, head.id, plan, {
    version: head.version + 1,
    partsChars: head.parts_chars,
    rewrite,
    headFollows: true,
  });
  // The plan's last new part's INSERT, if returned, runs with the head's UPDATE (one statement on Postgres).
  await updateDocumentHead(sql, { id: head.id, from_version: head.version, ...columns, parts_chars: partsChars }, along);
}
