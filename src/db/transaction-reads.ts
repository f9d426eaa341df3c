/**
 * The documents a Postgres write transaction read (db/document-cache.ts `readDocumentValue`), kept for
 * the rest of that transaction: a closure of several items (a claim round, a start, a shared closure of
 * answers) read the same project's documents once per item, each read a round trip for a head that had
 * not changed. A later read in the transaction returns the value the first one read, until the
 * transaction writes that document (db/projects.ts forgets it then, and the next read finds the
 * transaction's own version).
 *
 * Sound because a document read this way is not locked: under READ COMMITTED a second read could see a
 * version another transaction committed in between, but nothing ties the transaction's work to the
 * newer one (a write plans from its target, which it locks and reads itself: engine/operation-steps.ts
 * `applyThreadAnswer`); the first read's version is what a closure of one item would have read.
 *
 * Only on the Postgres writer's closure handle (the one with `Sql.atCommit`): a new handle per run of a
 * closure, so a run again after a rollback starts empty, and no reader's handle keeps a value past its
 * statement. SQLite's single writer reads its documents in microseconds: left as it was.
 */
import type { Sql } from '../core/sql.js';

interface Read {
  /** The document's id; null: it did not exist. */
  readonly id: string | null;
  /** The parse its value came from (readers parse differently). */
  readonly parse: unknown;
  readonly value: unknown;
}

interface TransactionReads {
  readonly byKey: Map<string, Read>;
  /** Bumped by every forget: a read in flight meanwhile is not kept (it may predate the write). */
  forgets: number;
}

const reads = new WeakMap<Sql, TransactionReads>();

const keyOf = (projectId: string, docType: string, key: string) => `${projectId}\0${docType}\0${key}`;

function readsOf(sql: Sql): TransactionReads | undefined {
  if (!sql.atCommit) return undefined;
  let held = reads.get(sql);
  if (!held) reads.set(sql, (held = { byKey: new Map(), forgets: 0 }));
  return held;
}

/** The value this transaction read of the document, with `parse`; undefined when it has not read it (or wrote it since). */
export function readInTransaction(sql: Sql, projectId: string, docType: string, key: string, parse: unknown): { value: unknown } | undefined {
  const read = reads.get(sql)?.byKey.get(keyOf(projectId, docType, key));
  return read && read.parse === parse ? read : undefined;
}

/** A mark to pass to `keepReadInTransaction`, taken before the read's statements are sent. */
export function readMark(sql: Sql): number {
  return readsOf(sql)?.forgets ?? 0;
}

/** Keeps a read for the rest of the transaction, unless the transaction wrote a document since `mark`. */
export function keepReadInTransaction(sql: Sql, mark: number, at: { projectId: string; docType: string; key: string }, read: Read): void {
  const held = readsOf(sql);
  if (held && held.forgets === mark) held.byKey.set(keyOf(at.projectId, at.docType, at.key), read);
}

/** The transaction writes this document (by id, or where a new one goes): its reads are forgotten. */
export function forgetReadInTransaction(sql: Sql, document: { id: string } | { project_id: string; doc_type: string; doc_key: string }): void {
  const held = reads.get(sql);
  if (!held) return;
  held.forgets++;
  if ('project_id' in document) {
    held.byKey.delete(keyOf(document.project_id, document.doc_type, document.doc_key));
    return;
  }
  for (const [k, read] of held.byKey) if (read.id === document.id) held.byKey.delete(k);
}
