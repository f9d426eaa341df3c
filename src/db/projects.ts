/** Projects and their documents (epic_architecture, story_backlog, and whatever operations write). */
import type { Sql } from '../core/sql.js';
import { SYSTEM_PROJECT_ID } from '../domain/project.js';
import type { DocumentRow, ProjectRow } from './schema.js';
import { runPartInsert, withWholeContent, type PartInsert } from './document-parts.js';
import { queueHeadUpdate, writesDocumentsAgain } from './document-parts-queued.js';
import { DONE, expectOneChange, runGuarded, runGuardedAtCommit, runGuardedAtCommitAlong } from './statements.js';
import { forgetReadInTransaction } from './transaction-reads.js';

export async function insertProject(sql: Sql, row: ProjectRow): Promise<void> {
  await sql.run('INSERT INTO projects (id, name, created_at) VALUES (@id, @name, @created_at)', row);
}

export async function renameProject(sql: Sql, id: string, name: string): Promise<void> {
  expectOneChange(await sql.run('UPDATE projects SET name = ? WHERE id = ?', [name, id]), `project ${id} does not exist`);
}

export function getProject(sql: Sql, id: string): Promise<ProjectRow | undefined> {
  return sql.get<ProjectRow>('SELECT * FROM projects WHERE id = ?', [id]);
}

/** Users' projects (the daemon's own system project is left out). */
export async function listProjects(sql: Sql): Promise<ProjectRow[]> {
  return (await sql.all('SELECT * FROM projects WHERE id <> ? ORDER BY created_at, id', [SYSTEM_PROJECT_ID])) as ProjectRow[];
}

type PartsColumns = 'parts_field' | 'parts_key' | 'parts_chars';

/** `doc_key` defaults to '' (the project's one document of that type); stored whole unless `parts_field` is set. */
export async function insertDocument(
  sql: Sql,
  row: Omit<DocumentRow, 'doc_key' | PartsColumns> & Partial<Pick<DocumentRow, 'doc_key' | PartsColumns>>,
): Promise<void> {
  const full = { doc_key: '', parts_field: null, parts_key: null, parts_chars: 0, ...row };
  forgetReadInTransaction(sql, full);
  await sql.run(
    `INSERT INTO documents (id, project_id, doc_type, doc_key, version, content, updated_at, parts_field, parts_key, parts_chars)
     VALUES (@id, @project_id, @doc_type, @doc_key, @version, @content, @updated_at, @parts_field, @parts_key, @parts_chars)`,
    full,
  );
  // Inserted now, whatever the handle: the row is this transaction's until it ends.
  heldHeads.get(sql)?.set(headKey(full), { ...headOf(full), project_id: full.project_id, doc_type: full.doc_type, doc_key: full.doc_key });
}

/** The project's one document of a type (epic_architecture, story_backlog). */
export async function getDocument(sql: Sql, projectId: string, docType: string): Promise<DocumentRow | undefined> {
  return withWholeContent(
    sql,
    await sql.get<DocumentRow>("SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ''", [projectId, docType]),
  );
}

/** One document of a type that exists per key (a briefing per date). */
export async function getKeyedDocument(sql: Sql, projectId: string, docType: string, key: string): Promise<DocumentRow | undefined> {
  return withWholeContent(
    sql,
    await sql.get<DocumentRow>('SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ?', [projectId, docType, key]),
  );
}

/** The keyed document with the greatest key (for dates: the newest briefing). */
export async function getLatestKeyedDocument(sql: Sql, projectId: string, docType: string): Promise<DocumentRow | undefined> {
  const text = "SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key <> '' ORDER BY doc_key DESC LIMIT 1";
  return withWholeContent(sql, await sql.get<DocumentRow>(text, [projectId, docType]));
}

/**
 * A project's documents without their content, by type, the greatest key first within a type (for
 * dates: the newest briefing), at most `limit`. Sorts only the project's rows (the unique index finds them).
 */
export async function listDocumentHeads(sql: Sql, projectId: string, limit: number): Promise<Omit<DocumentRow, 'content' | PartsColumns>[]> {
  return (await sql.all(
    'SELECT id, project_id, doc_type, doc_key, version, updated_at FROM documents WHERE project_id = ? ORDER BY doc_type, doc_key DESC LIMIT ?',
    [projectId, limit],
  )) as Omit<DocumentRow, 'content' | PartsColumns>[];
}

export type DocumentHead = Pick<DocumentRow, 'id' | 'version' | 'updated_at'>;

/**
 * A document without its content (which can be large): enough to check a cache. `key` '' is the type's one
 * document. A head the transaction holds (`heldHeads`) is answered without a statement, as the
 * transaction's own writes left it (its next version may be queued for the COMMIT: the row does not have it yet).
 */
export function getDocumentHead(sql: Sql, projectId: string, docType: string, key = ''): Promise<DocumentHead | undefined> {
  const held = heldHeads.get(sql)?.get(headKey({ project_id: projectId, doc_type: docType, doc_key: key }));
  if (held) return Promise.resolve({ id: held.id, version: held.version, updated_at: held.updated_at });
  const text = 'SELECT id, version, updated_at FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ?';
  return sql.get<DocumentHead>(text, [projectId, docType, key]);
}

/** A document's head as a write needs it: its version, and how it is stored (whole, or in parts). */
export type WriteHead = DocumentHead & Pick<DocumentRow, PartsColumns>;

/**
 * The document's head, the row locked until the transaction ends (Postgres): a write that plans the next
 * version from the current one holds it from the read to its update, so no other write's version can
 * land in between and be overwritten. SQLite's single writer already excludes that.
 */
export function lockDocumentHead(sql: Sql, projectId: string, docType: string, key = ''): Promise<WriteHead | undefined> {
  const held = heldHeads.get(sql)?.get(headKey({ project_id: projectId, doc_type: docType, doc_key: key }));
  if (held) return Promise.resolve(headOf(held));
  const text = 'SELECT id, version, updated_at, parts_field, parts_key, parts_chars FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ?';
  return sql.get<WriteHead>(sql.dialect === 'postgres' ? `${text} FOR UPDATE` : text, [projectId, docType, key]);
}

/** Where a document is (a thread's target: `doc_key` '' for the project's one document of its type). */
export interface DocumentTarget {
  project_id: string;
  doc_type: string;
  doc_key: string;
}

/**
 * Postgres: the heads of these documents locked until the transaction ends, in id order, in one
 * statement — a shared closure of answers (engine/leased.ts `ItemReads`) takes its targets' heads before
 * any answer's apply, as `lockDocumentHead` takes one: two daemons' closures over documents whose ids
 * interleave, each locking them in its answers' order, waited for each other. Before the heads, each
 * target's key, in key order (a transaction advisory lock): a document that does not exist yet has no head
 * to lock, and two closures creating the same two documents in crossing orders waited for each other's
 * INSERT. With the keys held, no other closure holds any of these heads.
 */
export async function lockDocumentHeads(sql: Sql, targets: readonly DocumentTarget[]): Promise<void> {
  const held = new Map<string, HeldHead>();
  heldHeads.set(sql, held);
  // A loop: docs/design-notes.md "Closures made per call".
  const keySet = new Set<string>();
  for (const t of targets) keySet.add(`document:${JSON.stringify([t.project_id, t.doc_type, t.doc_key])}`);
  const keys = [...keySet].sort();
  // The keys in this order: the outer query calls the lock function row by row over the sorted subquery.
  await sql.all(
    `SELECT pg_advisory_xact_lock(hashtextextended(s.k, 0)) AS locked
     FROM (SELECT t.k FROM jsonb_array_elements_text(CAST(? AS jsonb)) WITH ORDINALITY AS t(k, i) ORDER BY t.i) s`,
    [JSON.stringify(keys)],
  );
  // A target asked twice (two answers to one document) joins its row twice: locked once.
  const rows = await sql.all<HeldHead>(
    `SELECT d.id, d.project_id, d.doc_type, d.doc_key, d.version, d.updated_at, d.parts_field, d.parts_key, d.parts_chars
     FROM documents d
     JOIN jsonb_to_recordset(CAST(? AS jsonb)) AS x(project_id text, doc_type text, doc_key text)
       ON d.project_id = x.project_id AND d.doc_type = x.doc_type AND d.doc_key = x.doc_key
     ORDER BY d.id FOR UPDATE OF d`,
    [JSON.stringify(targets)],
  );
  for (const row of rows) held.set(headKey(row), row);
}

/** A head a transaction holds locked, with where it is. */
type HeldHead = WriteHead & DocumentTarget;

/**
 * The heads a Postgres transaction holds locked since `lockDocumentHeads` (a shared closure of answers),
 * by target, as the transaction's own writes left them: `lockDocumentHead` and `getDocumentHead` of one of
 * them are answered without a statement (each answer's apply read its target's head again, a round trip for
 * a row this transaction already held). Sound while the row is locked and every write of it goes through
 * here: no other transaction can change it, and a write here notes the head it leaves. On a handle that
 * writes documents again (document-parts-queued.ts `writeDocumentsAgain`: two answers of one project) the head's
 * update is still queued for the COMMIT (a round trip less per answer): the held head is then the only place
 * the next version is before the COMMIT, and a read of the row's content is refused until then
 * (document-parts-queued.ts `queueHeadUpdate`). Elsewhere a queued update forgets the head, so a later read would
 * read it. A target that did not exist is not held (another transaction may create it: the read looks
 * again), until this transaction inserts it. The closure's handle is its run's own: a run again starts with none held.
 */
const heldHeads = new WeakMap<Sql, Map<string, HeldHead>>();

const headKey = (t: DocumentTarget) => `${t.project_id}\0${t.doc_type}\0${t.doc_key}`;

function headOf(h: WriteHead): WriteHead {
  return { id: h.id, version: h.version, updated_at: h.updated_at, parts_field: h.parts_field, parts_key: h.parts_key, parts_chars: h.parts_chars };
}

/**
 * A document's next version as a guarded UPDATE: one of the transaction's last statements
 * (`runGuardedAtCommit`), with `along` (a new part's INSERT: db/document-parts.ts `writeDocumentParts`) as one
 * statement with it there (`runGuardedAtCommitAlong`: both counts checked). On a handle that writes documents
 * again (document-parts-queued.ts `writeDocumentsAgain`: a later write of the same document in the transaction
 * plans from this version) a held head carries the version until the COMMIT writes it (`heldHeads`,
 * document-parts-queued.ts `queueHeadUpdate`); the updates of one document run there in the order queued, each
 * guarded by the version the one before it left, each with its own write's INSERT: a later write's parts are
 * placed from this one's, which an earlier statement of the COMMIT's query inserted. A head not held there is
 * updated at once (`along` queued before it, as the write's other parts): a later read finds it in the row.
 */
function runDocumentUpdate(
  sql: Sql,
  text: string,
  params: Readonly<Record<string, unknown>>,
  next: WriteHead,
  what: string,
  along?: PartInsert,
): Promise<void> {
  forgetReadInTransaction(sql, next);
  if (writesDocumentsAgain(sql) && !carryHeldHead(sql, next)) {
    return (along ? runPartInsert(sql, along) : DONE).then(() => runGuarded(sql, text, params, what));
  }
  if (writesDocumentsAgain(sql)) queueHeadUpdate(sql, next.id);
  else forgetHeldHead(sql, next.id);
  if (along) return runGuardedAtCommitAlong(sql, text, params, what, along);
  return runGuardedAtCommit(sql, text, params, what);
}

/** A held head written with its update queued, but not carried (`heldHeads`): no longer known, a later read reads it. */
function forgetHeldHead(sql: Sql, id: string): void {
  const held = heldHeads.get(sql);
  if (held) for (const [key, head] of held) if (head.id === id) held.delete(key);
}

/** A held head's next version is `next` (`heldHeads`); false when the head is not held. */
function carryHeldHead(sql: Sql, next: WriteHead): boolean {
  const held = heldHeads.get(sql);
  let carried = false;
  if (held)
    for (const [key, head] of held) {
      if (head.id !== next.id) continue;
      held.set(key, { ...head, ...next });
      carried = true;
    }
  return carried;
}

/**
 * Writes a document's next version, whole (a document stored in parts: the caller drops its parts).
 * Guarded by the version it was read at (optimistic concurrency): throws StaleStateError if the
 * document changed in between. One of the transaction's last statements (`runGuardedAtCommit`: on
 * Postgres in its COMMIT's query, no round trip of its own): nothing after it in a write reads the row,
 * unless the handle writes documents again (`runDocumentUpdate`).
 */
export function updateDocumentContent(sql: Sql, p: { id: string; from_version: number; content: string; updated_at: number }): Promise<void> {
  return runDocumentUpdate(
    sql,
    `UPDATE documents SET content = @content, version = version + 1, updated_at = @updated_at, parts_field = NULL, parts_key = NULL, parts_chars = 0
     WHERE id = @id AND version = @from_version`,
    p,
    { id: p.id, version: p.from_version + 1, updated_at: p.updated_at, parts_field: null, parts_key: null, parts_chars: 0 },
    `document ${p.id} is no longer at version ${p.from_version}`,
  );
}

/**
 * Writes the next version of a document stored in parts: its head (`content`) and how its parts are
 * stored; the parts themselves are written by db/document-parts.ts in the same transaction, the last new
 * one's INSERT (`along`) with this UPDATE where it can be one statement (`runDocumentUpdate`). Guarded,
 * and run at the end, like updateDocumentContent.
 */
export function updateDocumentHead(
  sql: Sql,
  p: { id: string; from_version: number; content: string; updated_at: number; parts_field: string; parts_key: string; parts_chars: number },
  along?: PartInsert,
): Promise<void> {
  return runDocumentUpdate(
    sql,
    `UPDATE documents SET content = @content, version = version + 1, updated_at = @updated_at,
       parts_field = @parts_field, parts_key = @parts_key, parts_chars = @parts_chars
     WHERE id = @id AND version = @from_version`,
    p,
    { id: p.id, version: p.from_version + 1, updated_at: p.updated_at, parts_field: p.parts_field, parts_key: p.parts_key, parts_chars: p.parts_chars },
    `document ${p.id} is no longer at version ${p.from_version}`,
    along,
  );
}
