/**
 * Documents stored in parts (domain/document-parts.ts): the statements on `document_parts`, a plan's
 * writes, and putting a document's content back together for its readers. A document's version stays
 * on its row: every write in parts also updates that row, guarded by the version it was read at.
 */
import type { Sql } from '../core/sql.js';
import { assembleDocumentText, type PartsLayout, type PartsPlan } from '../domain/document-parts.js';
import type { DocumentRow } from './schema.js';
import {
  assertNoQueuedParts,
  headUpdateQueued,
  noSpreadAgain,
  queuedPartsOf,
  queuedPlacesOf,
  queuedRemovalsOf,
  queuePart,
  writesDocumentsAgain,
} from './document-parts-queued.js';
import { placeRuns, type PlacedPart } from './document-part-places.js';
import { type AlongStatement, expectOneChange, runAtCommit, runGuardedAtCommit } from './statements.js';

/** A document's version and time with its content, whole: the head filled in with its parts when it has some. */
export interface WholeDocument {
  version: number;
  updated_at: number;
  content: string;
}

/**
 * A document as stored: its version and time, and its content whole (`layout` null) or as its head and
 * its parts in order, each with its text when it was written after the version the reader asked from.
 */
export interface StoredDocument {
  version: number;
  updated_at: number;
  head: string;
  layout: PartsLayout | null;
  parts: { key: string; text: string | null }[];
}

/**
 * Document `id` as stored, read in one statement (its row joined with its parts): a write committed
 * between two statements (the reader of a pool may run them on two connections) would mix two versions.
 * Every part's key comes back, in order; its text only if a version after `since` wrote it (-1: all):
 * a reader that holds version `since` has the others' already. A part of version 0 was written by a
 * build before parts carried their version (migration 0019 set the stored ones'), so it always comes back.
 * On Postgres, where daemons of two builds may share the database during an upgrade, such a build's UPDATE
 * of a part's content sets its version back to 0 (a trigger, migration pg/0016).
 */
export async function readStoredDocument(sql: Sql, id: string, since = -1): Promise<StoredDocument | undefined> {
  assertNoQueuedParts(sql, id);
  if (headUpdateQueued(sql, id)) {
    throw new Error(
      `document ${id} was already written in this transaction: its next version is written at COMMIT and a read of its content now would mix two versions`,
    );
  }
  const rows = await sql.all<{
    version: number;
    updated_at: number;
    head: string;
    parts_field: string | null;
    parts_key: string | null;
    part_key: string | null;
    part: string | null;
  }>(
    `SELECT d.version, d.updated_at, d.content AS head, d.parts_field, d.parts_key, p.part_key,
       CASE WHEN p.version > ? OR p.version = 0 THEN p.content END AS part
     FROM documents d LEFT JOIN document_parts p ON p.document_id = d.id AND d.parts_field IS NOT NULL
     WHERE d.id = ? ORDER BY p.ord`,
    [since, id],
  );
  const first = rows[0];
  if (!first) return undefined;
  const { version, updated_at, head } = first;
  const layout = storedLayout(first);
  if (layout === null) return { version, updated_at, head, layout, parts: [] };
  // A loop: docs/design-notes.md "Closures made per call".
  const parts: { key: string; text: string | null }[] = [];
  for (const r of rows) if (r.part_key !== null) parts.push({ key: r.part_key, text: r.part });
  return { version, updated_at, head, layout, parts };
}

/** Document `id` whole, read in one statement (readStoredDocument). */
export async function readWholeDocument(sql: Sql, id: string): Promise<WholeDocument | undefined> {
  const stored = await readStoredDocument(sql, id);
  if (!stored) return undefined;
  const { version, updated_at, head, layout } = stored;
  if (layout === null) return { version, updated_at, content: head };
  return {
    version,
    updated_at,
    content: assembleDocumentText(
      head,
      layout.field,
      stored.parts.map((p) => p.text!),
    ),
  };
}

/** `row` with its whole content, version and time (a document stored in parts is read again whole). */
export async function withWholeContent<T extends DocumentRow>(sql: Sql, row: T | undefined): Promise<T | undefined> {
  if (!row || row.parts_field === null) return row;
  const whole = await readWholeDocument(sql, row.id);
  return whole && { ...row, ...whole };
}

const INSERT_DOCUMENT_PART =
  'INSERT INTO document_parts (document_id, part_key, ord, content, version) VALUES (@document_id, @part_key, @ord, @part_text, @version)';

const INSERT_DOCUMENT_PART_NEXT_TO = `INSERT INTO document_parts (document_id, part_key, ord, content, version)
  SELECT @document_id, @part_key, n.ord + @by, @part_text, @version FROM document_parts n WHERE n.document_id = @document_id AND n.part_key = @to`;

/**
 * A new part's INSERT, not run yet: its text and named parameters (the part's content is `@part_text`, so that
 * they do not clash with the head's UPDATE's, which may run it: `writeDocumentParts`), and `what` when it is guarded
 * (one row inserted, or it fails naming `what`).
 */
export type PartInsert = AlongStatement & { params: Record<string, unknown> };

/**
 * The INSERT of new part `p` of document `documentId` as written by version `version`: at its ord
 * (`INSERT_DOCUMENT_PART`), or next to a neighbour (`INSERT_DOCUMENT_PART_NEXT_TO`: its ord is the neighbour's
 * (`next.to`) plus `next.by`, taken by the insert itself from the neighbour's row, guarded: one row inserted,
 * the neighbour is there). Notes the part where the transaction's later plans look for it (`queuePart` on a
 * handle that writes documents again, `queuedPartsOf` elsewhere on one that runs statements at COMMIT).
 *
 * Run in the COMMIT's query on a handle that has one (`runPartInsert`, or with the head's update:
 * `writeDocumentParts`): a round trip less while the document's row is locked (every write to it waits for that
 * lock), and an insert needs no answer (a key already taken fails the COMMIT's query, which rolls the whole
 * transaction back). The neighbour is read there: it was there before the plan's writes (in the table, or
 * inserted by a statement queued before this one: the COMMIT runs them in the order queued), and none of them
 * removes it (each part of a run is placed from the run's neighbour, not from another part of the run). The
 * transaction's own later statements do not see such a part: see `assertNoQueuedParts`, and
 * `writeDocumentsAgain` for a transaction that plans from it.
 */
function partInsert(sql: Sql, documentId: string, p: PlacedPart, version: number): PartInsert {
  const row = { document_id: documentId, part_key: p.key, part_text: p.text, version };
  const again = writesDocumentsAgain(sql);
  if ('ord' in p) {
    if (again) queuePart(sql, documentId, p.key, { from: null, by: p.ord });
    else if (sql.atCommit) queuedPartsOf(sql).add(documentId);
    return { text: INSERT_DOCUMENT_PART, params: { ...row, ord: p.ord } };
  }
  const { to, by } = p.next;
  if (again) {
    const neighbour = queuedPlacesOf(sql, documentId).get(to);
    queuePart(sql, documentId, p.key, neighbour ? { from: neighbour.from, by: neighbour.by + by } : { from: to, by });
  } else if (sql.atCommit) queuedPartsOf(sql).add(documentId);
  return { text: INSERT_DOCUMENT_PART_NEXT_TO, params: { ...row, to, by }, what: `document ${documentId} has no part "${to}"` };
}

/** Runs a new part's INSERT (`partInsert`) where it runs: in the COMMIT's query on a handle that has one, now elsewhere. */
export function runPartInsert(sql: Sql, insert: PartInsert): Promise<void> {
  return insert.what === undefined ? runAtCommit(sql, insert.text, insert.params) : runGuardedAtCommit(sql, insert.text, insert.params, insert.what);
}

const UPDATE_DOCUMENT_PART = 'UPDATE document_parts SET content = @content, version = @version WHERE document_id = @document_id AND part_key = @part_key';

/** A part's new content, guarded (the part is there); queued behind the transaction's parts on a handle that writes documents again. */
async function updateDocumentPart(sql: Sql, documentId: string, key: string, content: string, version: number): Promise<void> {
  const params = { content, version, document_id: documentId, part_key: key };
  const what = `document ${documentId} has no part "${key}"`;
  if (writesDocumentsAgain(sql)) return runGuardedAtCommit(sql, UPDATE_DOCUMENT_PART, params, what);
  expectOneChange(await sql.run(UPDATE_DOCUMENT_PART, params), what);
}

const DELETE_DOCUMENT_PART = 'DELETE FROM document_parts WHERE document_id = @document_id AND part_key = @part_key';

/** A part removed, guarded; queued like `updateDocumentPart` (the table's part stays a queued part's `from` until then). */
async function deleteDocumentPart(sql: Sql, documentId: string, key: string): Promise<void> {
  const params = { document_id: documentId, part_key: key };
  const what = `document ${documentId} has no part "${key}"`;
  if (writesDocumentsAgain(sql)) {
    queuedPlacesOf(sql, documentId).delete(key);
    queuedRemovalsOf(sql, documentId).add(key);
    return runGuardedAtCommit(sql, DELETE_DOCUMENT_PART, params, what);
  }
  expectOneChange(await sql.run(DELETE_DOCUMENT_PART, params), what);
}

const DELETE_DOCUMENT_PARTS = 'DELETE FROM document_parts WHERE document_id = @document_id';

/** Drops all of a document's parts (before it is written whole, or all its parts again); queued like `updateDocumentPart`. */
export async function deleteDocumentParts(sql: Sql, documentId: string): Promise<void> {
  if (writesDocumentsAgain(sql)) {
    // Every part placed after this is placed from a part placed after it: none from the table's.
    queuedPlacesOf(sql, documentId).clear();
    noSpreadAgain(sql, documentId);
    return runAtCommit(sql, DELETE_DOCUMENT_PARTS, { document_id: documentId });
  }
  assertNoQueuedParts(sql, documentId);
  await sql.run(DELETE_DOCUMENT_PARTS, { document_id: documentId });
}

/** Every part written again, their INSERTs not run yet; parts left from before go first (also those of a document since written whole). */
async function rewriteParts(sql: Sql, documentId: string, version: number, plan: PartsPlan & { kind: 'rewrite' }): Promise<PartInsert[]> {
  await deleteDocumentParts(sql, documentId);
  return plan.parts.map((p, ord) => partInsert(sql, documentId, { ...p, ord }, version));
}

/**
 * Writes a plan's parts for document `documentId`, as written by its version `o.version` (`partsChars`:
 * the parts' characters before it), and returns the parts' characters after it. `rewrite` builds the plan
 * that writes every part, for when new elements find no order between their neighbours'.
 *
 * `o.headFollows`: the caller writes the head's next version next (db/projects.ts `updateDocumentHead`; a new
 * document's head was inserted before its parts). Then, on a handle that runs statements in its COMMIT's query,
 * the plan's last new part's INSERT is not run but returned (`along`), for the head's guarded UPDATE to run it
 * as one statement there (a data-modifying CTE each: db/statements.ts `runGuardedAtCommitAlong`), both counts
 * checked, one snapshot for both — sound, as neither reads what the other writes (the INSERT reads its
 * neighbour's part, never the head, and its neighbour is never a part of the same write: `partInsert`), and the
 * statement takes the head's place in the COMMIT's query, right behind the write's other parts. A closure that
 * writes the document again (`writeDocumentsAgain`) queues one such statement per write, in the order written:
 * a later write's INSERT, placed from a part an earlier write inserted, reads it in a statement after that one.
 */
export async function writeDocumentParts(
  sql: Sql,
  documentId: string,
  plan: PartsPlan,
  o: { version: number; partsChars: number; rewrite: () => PartsPlan & { kind: 'rewrite' }; headFollows: boolean },
): Promise<{ partsChars: number; along: PartInsert | undefined }> {
  assertNoQueuedParts(sql, documentId);
  const { inserts, partsChars } = await writePlan(sql, documentId, plan, o);
  const along = o.headFollows && sql.atCommit ? inserts.pop() : undefined;
  for (const insert of inserts) await runPartInsert(sql, insert);
  return { partsChars, along };
}

/** A plan's removals and changes written, its new parts' INSERTs to run (`partInsert`), and the parts' characters after it. */
async function writePlan(
  sql: Sql,
  documentId: string,
  plan: PartsPlan,
  o: { version: number; partsChars: number; rewrite: () => PartsPlan & { kind: 'rewrite' } },
): Promise<{ inserts: PartInsert[]; partsChars: number }> {
  if (plan.kind === 'rewrite') return { inserts: await rewriteParts(sql, documentId, o.version, plan), partsChars: plan.chars };
  const placed = await placeRuns(sql, documentId, plan);
  if (!placed) {
    const rewrite = o.rewrite();
    return { inserts: await rewriteParts(sql, documentId, o.version, rewrite), partsChars: rewrite.chars };
  }
  for (const key of plan.removed) await deleteDocumentPart(sql, documentId, key);
  for (const p of plan.changed) await updateDocumentPart(sql, documentId, p.key, p.text, o.version);
  return { inserts: placed.map((p) => partInsert(sql, documentId, p, o.version)), partsChars: o.partsChars + plan.charsDelta };
}

/** The layout a document is stored by, or null when it is stored whole. */
export function storedLayout(row: Pick<DocumentRow, 'parts_field' | 'parts_key'>): PartsLayout | null {
  return row.parts_field !== null && row.parts_key !== null ? { field: row.parts_field, key: row.parts_key } : null;
}
