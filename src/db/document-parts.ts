/**
 * Documents stored in parts (domain/document-parts.ts): the statements on `document_parts`, a plan's
 * writes, and putting a document's content back together for its readers. A document's version stays
 * on its row: every write in parts also updates that row, guarded by the version it was read at.
 */
import type { Sql } from '../core/sql.js';
import { assembleDocumentText, ordsBetween, type PartsLayout, type PartsPlan } from '../domain/document-parts.js';
import type { DocumentPartRow, DocumentRow } from './schema.js';
import { expectOneChange, runAtCommit, runGuardedAtCommit } from './statements.js';

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
  const parts = rows.flatMap((r) => (r.part_key === null ? [] : [{ key: r.part_key, text: r.part }]));
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

/** The order keys of two of a document's parts (each must exist), read in one statement. */
async function getDocumentPartOrds(sql: Sql, documentId: string, keys: readonly [string, string]): Promise<Map<string, number>> {
  const rows = await sql.all<{ part_key: string; ord: number }>('SELECT part_key, ord FROM document_parts WHERE document_id = ? AND part_key IN (?, ?)', [
    documentId,
    keys[0],
    keys[1],
  ]);
  const ords = new Map(rows.map((r) => [r.part_key, r.ord]));
  for (const key of keys) if (!ords.has(key)) throw new Error(`document ${documentId} has no part "${key}"`);
  return ords;
}

/**
 * Where a part this transaction queued for its COMMIT will be (`writeDocumentsAgain`): its ord is `by` plus
 * the ord of part `from` as the table has it now (`from` null: `by` itself). A part placed next to a queued
 * one is placed from that one's `from`, so `from` is always a part of the table, read in one statement when
 * a later plan of the transaction needs the ords of two neighbours (`getPlannedPartOrds`).
 */
interface QueuedPlace {
  from: string | null;
  by: number;
}

/** By handle, by document: the places of the parts a handle that writes documents again queued (`writeDocumentsAgain`). */
const queuedPlaces = new WeakMap<Sql, Map<string, Map<string, QueuedPlace>>>();

function queuedPlacesOf(sql: Sql, documentId: string): Map<string, QueuedPlace> {
  let documents = queuedPlaces.get(sql);
  if (!documents) queuedPlaces.set(sql, (documents = new Map()));
  let places = documents.get(documentId);
  if (!places) documents.set(documentId, (places = new Map()));
  return places;
}

/**
 * `getDocumentPartOrds` as this transaction's queued writes leave the document (`QueuedPlace`): a queued
 * part's ord from its `from` part's as the table has it (one statement for both; none when neither has one).
 */
async function getPlannedPartOrds(sql: Sql, documentId: string, keys: readonly [string, string]): Promise<Map<string, number>> {
  const places = queuedPlacesOf(sql, documentId);
  const placed = keys.map((key) => places.get(key) ?? { from: key, by: 0 });
  const from = placed.map((p) => p.from).filter((k): k is string => k !== null);
  const read = from.length === 0 ? new Map<string, number>() : await getDocumentPartOrds(sql, documentId, [from[0]!, from[1] ?? from[0]!]);
  return new Map(keys.map((key, i) => [key, (placed[i]!.from === null ? 0 : read.get(placed[i]!.from!)!) + placed[i]!.by]));
}

/** A new part to insert: at its ord, or next to a neighbour, `by` from the neighbour's ord. */
type PlacedPart = { key: string; text: string } & ({ ord: number } | { next: { to: string; by: number } });

const INSERT_DOCUMENT_PART =
  'INSERT INTO document_parts (document_id, part_key, ord, content, version) VALUES (@document_id, @part_key, @ord, @content, @version)';

/**
 * On a handle that runs statements in its COMMIT's query (the Postgres writer's `Sql.atCommit`) the
 * insert goes there: a round trip less while the document's row is locked (every write to it waits for
 * that lock), and an insert needs no answer (a key already taken fails the COMMIT's query, which rolls the whole transaction back).
 * The transaction's own later statements do not see such a part: see `assertNoQueuedParts`, and
 * `writeDocumentsAgain` for a transaction that plans from it.
 */
function insertDocumentPart(sql: Sql, row: DocumentPartRow): Promise<void> {
  if (writesDocumentsAgain(sql)) queuePart(sql, row.document_id, row.part_key, { from: null, by: row.ord });
  else if (sql.atCommit) queuedPartsOf(sql).add(row.document_id);
  return runAtCommit(sql, INSERT_DOCUMENT_PART, row);
}

const INSERT_DOCUMENT_PART_NEXT_TO = `INSERT INTO document_parts (document_id, part_key, ord, content, version)
  SELECT @document_id, @part_key, n.ord + @by, @content, @version FROM document_parts n WHERE n.document_id = @document_id AND n.part_key = @to`;

/**
 * `insertDocumentPart` of a part whose ord is its neighbour's (`next.to`) plus `next.by`, taken by the insert
 * itself from the neighbour's row: guarded (one row inserted: the neighbour is there), and where
 * `insertDocumentPart` runs it. Queued for the COMMIT, the neighbour is read there: it was there before the
 * plan's writes (in the table, or inserted by a statement queued before this one: the COMMIT runs them in
 * the order queued), and none of them removes it (each part of a run is placed from the run's neighbour, not
 * from another part of the run).
 */
function insertDocumentPartNextTo(sql: Sql, row: Omit<DocumentPartRow, 'ord'>, next: { to: string; by: number }): Promise<void> {
  const params = { ...row, ...next };
  const what = `document ${row.document_id} has no part "${next.to}"`;
  if (writesDocumentsAgain(sql)) {
    const neighbour = queuedPlacesOf(sql, row.document_id).get(next.to);
    queuePart(sql, row.document_id, row.part_key, neighbour ? { from: neighbour.from, by: neighbour.by + next.by } : { from: next.to, by: next.by });
  } else if (sql.atCommit) queuedPartsOf(sql).add(row.document_id);
  return runGuardedAtCommit(sql, INSERT_DOCUMENT_PART_NEXT_TO, params, what);
}

/** A new part's place noted (`QueuedPlace`), and its document's next version as queued (`queueHeadUpdate`). */
function queuePart(sql: Sql, documentId: string, key: string, place: QueuedPlace): void {
  queuedPlacesOf(sql, documentId).set(key, place);
  queueHeadUpdate(sql, documentId);
}

/** Handles whose transaction may write a document again (`writeDocumentsAgain`), by the closure run's statement handle. */
const again = new WeakSet<Sql>();

/**
 * This transaction may read or write again a document it wrote (a shared closure of answers, two of them of
 * one project: engine/leased.ts `ItemReads`). Its writes of parts are still queued for its COMMIT's query
 * (no round trip each while the closure holds its heads: they run there in the order queued), and each
 * new part's place is noted (`QueuedPlace`): a later plan of the document finds its neighbours' ords from
 * the table's parts they were placed from, and its later writes (a part's update or delete, guarded, or
 * all parts deleted) are queued behind them. A later read of its head finds the version the write left in
 * the heads the transaction holds (db/projects.ts `heldHeads`: the head's own update rides in the COMMIT's
 * query too), and its value where the documents cache keeps it for this handle (`rememberDocument`,
 * db/document-cache.ts `ownWrites`): a read of its content from the table is refused (`queueHeadUpdate`). A
 * closure run again starts on a new handle, and marks it again.
 */
export function writeDocumentsAgain(sql: Sql): void {
  again.add(sql);
}

/**
 * The documents whose next version a handle that writes documents again queued for its COMMIT, their
 * heads held (db/projects.ts `runDocumentUpdate`) or their parts queued (`queuePart`): their rows are a
 * version behind until then, so a read of a document's content from the table would join the older head
 * with the older parts. It is refused (`readStoredDocument`); the transaction's reads take the held head
 * and the value the transaction wrote (db/document-cache.ts `rememberDocument`, kept for this handle).
 * Postgres only: heads are held there only.
 */
const queuedHeads = new WeakMap<Sql, Set<string>>();

/** Document `documentId`'s next version is queued for this handle's COMMIT (`queuedHeads`). */
export function queueHeadUpdate(sql: Sql, documentId: string): void {
  let documents = queuedHeads.get(sql);
  if (!documents) queuedHeads.set(sql, (documents = new Set()));
  documents.add(documentId);
}

/** Whether document `documentId`'s next version is queued for this handle's COMMIT (`queueHeadUpdate`). */
export function headUpdateQueued(sql: Sql, documentId: string): boolean {
  return queuedHeads.get(sql)?.has(documentId) ?? false;
}

/** Whether `writeDocumentsAgain` marked this handle. */
export function writesDocumentsAgain(sql: Sql): boolean {
  return again.has(sql);
}

/**
 * The documents whose new parts a transaction queued for its COMMIT's query, by its statement handle
 * (one per write closure's run: a run again starts empty).
 */
const queuedParts = new WeakMap<Sql, Set<string>>();

function queuedPartsOf(sql: Sql): Set<string> {
  let documents = queuedParts.get(sql);
  if (!documents) queuedParts.set(sql, (documents = new Set()));
  return documents;
}

/**
 * Refuses to read or write document `documentId` after this transaction queued new parts of it for its
 * COMMIT: they are not in the table yet, so the read would miss them and the write would plan from a
 * document without them (a neighbour not found, a part deleted now that the COMMIT inserts again). The
 * one writer of parts is an answer's apply (engine/operation-steps.ts): a transaction that may apply
 * two answers of one project (a shared closure of answers) plans from its queued parts
 * (`writeDocumentsAgain`), and any other writes each document at most once. This keeps it so:
 * a change that writes twice without the mark fails here, loudly, on its first run. SQLite runs the
 * inserts at once and has nothing to refuse.
 */
function assertNoQueuedParts(sql: Sql, documentId: string): void {
  if (queuedParts.get(sql)?.has(documentId)) {
    throw new Error(
      `document ${documentId} was already written in this transaction: its new parts are inserted at COMMIT and a second read or write of it would miss them`,
    );
  }
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
    return runAtCommit(sql, DELETE_DOCUMENT_PARTS, { document_id: documentId });
  }
  assertNoQueuedParts(sql, documentId);
  await sql.run(DELETE_DOCUMENT_PARTS, { document_id: documentId });
}

/** Every part written again; parts left from before go first (also those of a document since written whole). */
async function rewriteParts(sql: Sql, documentId: string, version: number, plan: PartsPlan & { kind: 'rewrite' }): Promise<number> {
  await deleteDocumentParts(sql, documentId);
  for (const [i, p] of plan.parts.entries()) await insertDocumentPart(sql, { document_id: documentId, part_key: p.key, ord: i, content: p.text, version });
  return plan.chars;
}

/**
 * Writes a plan's parts for document `documentId`, as written by its version `o.version`, and returns
 * the parts' characters after it (`partsChars`: before it). The head row is the caller's.
 * `rewrite` builds the plan that writes every part, for when new elements find no order between
 * their neighbours'.
 */
export async function writeDocumentParts(
  sql: Sql,
  documentId: string,
  plan: PartsPlan,
  o: { version: number; partsChars: number; rewrite: () => PartsPlan & { kind: 'rewrite' } },
): Promise<number> {
  assertNoQueuedParts(sql, documentId);
  if (plan.kind === 'rewrite') return rewriteParts(sql, documentId, o.version, plan);
  const placed: PlacedPart[] = [];
  for (const run of plan.inserted) {
    // The run's neighbours exist before this plan's writes (a run never borders another run's parts): in
    // the table, or queued by an earlier write of this transaction on a handle that writes documents again.
    const { after, before } = run;
    if (after === null || before === null) {
      // One neighbour (or none): `ordsBetween` always places the run from it — its ords counted from the
      // neighbour's as 0 are each part's offset — so each insert takes its neighbour's ord itself
      // (`insertDocumentPartNextTo`): no read of the ords, and on a handle that runs statements in its
      // COMMIT's query none of the run's statements is a round trip of its own.
      const neighbour = after ?? before;
      const offsets = ordsBetween(after === null ? null : 0, before === null ? null : 0, run.parts.length)!;
      for (const [i, p] of run.parts.entries()) {
        placed.push(neighbour === null ? { ...p, ord: offsets[i]! } : { ...p, next: { to: neighbour, by: offsets[i]! } });
      }
      continue;
    }
    const found = await (writesDocumentsAgain(sql) ? getPlannedPartOrds : getDocumentPartOrds)(sql, documentId, [after, before]);
    const ords = ordsBetween(found.get(after)!, found.get(before)!, run.parts.length);
    if (!ords) return rewriteParts(sql, documentId, o.version, o.rewrite());
    for (const [i, p] of run.parts.entries()) placed.push({ ...p, ord: ords[i]! });
  }
  for (const key of plan.removed) await deleteDocumentPart(sql, documentId, key);
  for (const p of plan.changed) await updateDocumentPart(sql, documentId, p.key, p.text, o.version);
  for (const p of placed) {
    const row = { document_id: documentId, part_key: p.key, content: p.text, version: o.version };
    await ('ord' in p ? insertDocumentPart(sql, { ...row, ord: p.ord }) : insertDocumentPartNextTo(sql, row, p.next));
  }
  return o.partsChars + plan.charsDelta;
}

/** The layout a document is stored by, or null when it is stored whole. */
export function storedLayout(row: Pick<DocumentRow, 'parts_field' | 'parts_key'>): PartsLayout | null {
  return row.parts_field !== null && row.parts_key !== null ? { field: row.parts_field, key: row.parts_key } : null;
}
