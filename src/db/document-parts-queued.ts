/**
 * What a transaction queued for its COMMIT's query when it writes documents stored in parts
 * (db/document-parts.ts): on the Postgres writer's handle (`Sql.atCommit`) the parts' writes run there, so
 * the transaction's own later reads and plans of a document must know what the table does not show yet.
 * Kept by statement handle (one per write closure's run: a run again starts empty).
 */
import type { Sql } from '../core/sql.js';

/**
 * Where a part this transaction queued for its COMMIT will be (`writeDocumentsAgain`): its ord is `by` plus
 * the ord of part `from` as the table has it now (`from` null: `by` itself). A part placed next to a queued
 * one is placed from that one's `from`, so `from` is always a part of the table, read in one statement when
 * a later plan of the transaction needs the ords of two neighbours (`getPlannedPartOrds`).
 */
export interface QueuedPlace {
  from: string | null;
  by: number;
}

/** By handle, by document: the places of the parts a handle that writes documents again queued (`writeDocumentsAgain`). */
const queuedPlaces = new WeakMap<Sql, Map<string, Map<string, QueuedPlace>>>();

export function queuedPlacesOf(sql: Sql, documentId: string): Map<string, QueuedPlace> {
  let documents = queuedPlaces.get(sql);
  if (!documents) queuedPlaces.set(sql, (documents = new Map()));
  let places = documents.get(documentId);
  if (!places) documents.set(documentId, (places = new Map()));
  return places;
}

/** A new part's place noted (`QueuedPlace`), and its document's next version as queued (`queueHeadUpdate`). */
export function queuePart(sql: Sql, documentId: string, key: string, place: QueuedPlace): void {
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

export function queuedPartsOf(sql: Sql): Set<string> {
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
export function assertNoQueuedParts(sql: Sql, documentId: string): void {
  if (queuedParts.get(sql)?.has(documentId)) {
    throw new Error(
      `document ${documentId} was already written in this transaction: its new parts are inserted at COMMIT and a second read or write of it would miss them`,
    );
  }
}

/** By handle, by document: parts a handle that writes documents again deleted at its COMMIT (still in the table until then). */
const queuedRemovals = new WeakMap<Sql, Map<string, Set<string>>>();

export function queuedRemovalsOf(sql: Sql, documentId: string): Set<string> {
  let documents = queuedRemovals.get(sql);
  if (!documents) queuedRemovals.set(sql, (documents = new Map()));
  let keys = documents.get(documentId);
  if (!keys) documents.set(documentId, (keys = new Set()));
  return keys;
}

/**
 * By handle that writes documents again: documents whose parts it moved apart (`spreadNeighbours`) or
 * deleted all of. The table's orders are then no longer the ones the transaction plans from, so a second
 * spread is refused there: the run takes the orders between its neighbours as they are, and only once the
 * numbers between them run out are all parts written again (a spread leaves room for many runs). Other
 * handles plan from the table as it is (SQLite) or write a document once (`assertNoQueuedParts`).
 */
const spreadDone = new WeakMap<Sql, Set<string>>();

/** Whether a spread of document `documentId` is refused on this handle (`spreadDone`). */
export function spreadRefused(sql: Sql, documentId: string): boolean {
  return spreadDone.get(sql)?.has(documentId) ?? false;
}

/** Refuses spreads of document `documentId` for the rest of this handle's transaction (`spreadDone`). */
export function noSpreadAgain(sql: Sql, documentId: string): void {
  let documents = spreadDone.get(sql);
  if (!documents) spreadDone.set(sql, (documents = new Set()));
  documents.add(documentId);
}
