/** Projects and their documents (epic_architecture, story_backlog, and whatever operations write). */
import type { Db } from './connection.js';
import type { DocumentRow, ProjectRow } from './schema.js';
import { expectOneChange, prepared } from './statements.js';

export function insertProject(db: Db, row: ProjectRow): void {
  prepared(db, 'INSERT INTO projects (id, name, created_at) VALUES (@id, @name, @created_at)').run(row);
}

export function renameProject(db: Db, id: string, name: string): void {
  expectOneChange(prepared(db, 'UPDATE projects SET name = ? WHERE id = ?').run(name, id), `project ${id} does not exist`);
}

export function getProject(db: Db, id: string): ProjectRow | undefined {
  return prepared(db, 'SELECT * FROM projects WHERE id = ?').get(id) as ProjectRow | undefined;
}

export function listProjects(db: Db): ProjectRow[] {
  return prepared(db, 'SELECT * FROM projects ORDER BY created_at, id').all() as ProjectRow[];
}

/** `doc_key` defaults to '' (the project's one document of that type). */
export function insertDocument(db: Db, row: Omit<DocumentRow, 'doc_key'> & { doc_key?: string }): void {
  prepared(
    db,
    `INSERT INTO documents (id, project_id, doc_type, doc_key, version, content, updated_at)
     VALUES (@id, @project_id, @doc_type, @doc_key, @version, @content, @updated_at)`,
  ).run({ doc_key: '', ...row });
}

/** The project's one document of a type (epic_architecture, story_backlog). */
export function getDocument(db: Db, projectId: string, docType: string): DocumentRow | undefined {
  return prepared(db, "SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ''").get(projectId, docType) as DocumentRow | undefined;
}

/** One document of a type that exists per key (a briefing per date). */
export function getKeyedDocument(db: Db, projectId: string, docType: string, key: string): DocumentRow | undefined {
  return prepared(db, 'SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ?').get(projectId, docType, key) as DocumentRow | undefined;
}

/** The keyed document with the greatest key (for dates: the newest briefing). */
export function getLatestKeyedDocument(db: Db, projectId: string, docType: string): DocumentRow | undefined {
  return prepared(db, "SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key <> '' ORDER BY doc_key DESC LIMIT 1").get(
    projectId,
    docType,
  ) as DocumentRow | undefined;
}

/**
 * A project's documents without their content, by type, the greatest key first within a type (for
 * dates: the newest briefing), at most `limit`. Sorts only the project's rows (the unique index finds them).
 */
export function listDocumentHeads(db: Db, projectId: string, limit: number): Omit<DocumentRow, 'content'>[] {
  return prepared(
    db,
    'SELECT id, project_id, doc_type, doc_key, version, updated_at FROM documents WHERE project_id = ? ORDER BY doc_type, doc_key DESC LIMIT ?',
  ).all(projectId, limit) as Omit<DocumentRow, 'content'>[];
}

export type DocumentHead = Pick<DocumentRow, 'id' | 'version' | 'updated_at'>;

/** A document without its content (which can be large): enough to check a cache. `key` '' is the type's one document. */
export function getDocumentHead(db: Db, projectId: string, docType: string, key = ''): DocumentHead | undefined {
  return prepared(db, 'SELECT id, version, updated_at FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ?').get(projectId, docType, key) as
    | DocumentHead
    | undefined;
}

export function getDocumentContent(db: Db, id: string): string | undefined {
  return (prepared(db, 'SELECT content FROM documents WHERE id = ?').get(id) as { content: string } | undefined)?.content;
}

/**
 * Writes a document's next version. Guarded by the version it was read at (optimistic concurrency):
 * throws StaleStateError if the document changed in between.
 */
export function updateDocumentContent(db: Db, p: { id: string; from_version: number; content: string; updated_at: number }): void {
  const result = prepared(
    db,
    `UPDATE documents SET content = @content, version = version + 1, updated_at = @updated_at
     WHERE id = @id AND version = @from_version`,
  ).run(p);
  expectOneChange(result, `document ${p.id} is no longer at version ${p.from_version}`);
}
