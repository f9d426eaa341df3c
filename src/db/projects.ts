/** Projects and their documents (epic_architecture, story_backlog, and whatever operations write). */
import type { Sql } from '../core/sql.js';
import { SYSTEM_PROJECT_ID } from '../domain/project.js';
import type { DocumentRow, ProjectRow } from './schema.js';
import { expectOneChange, runGuarded } from './statements.js';

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

/** `doc_key` defaults to '' (the project's one document of that type). */
export async function insertDocument(sql: Sql, row: Omit<DocumentRow, 'doc_key'> & { doc_key?: string }): Promise<void> {
  await sql.run(
    `INSERT INTO documents (id, project_id, doc_type, doc_key, version, content, updated_at)
     VALUES (@id, @project_id, @doc_type, @doc_key, @version, @content, @updated_at)`,
    { doc_key: '', ...row },
  );
}

/** The project's one document of a type (epic_architecture, story_backlog). */
export async function getDocument(sql: Sql, projectId: string, docType: string): Promise<DocumentRow | undefined> {
  return (await sql.get("SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ''", [projectId, docType])) as DocumentRow | undefined;
}

/** One document of a type that exists per key (a briefing per date). */
export async function getKeyedDocument(sql: Sql, projectId: string, docType: string, key: string): Promise<DocumentRow | undefined> {
  return (await sql.get('SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ?', [projectId, docType, key])) as DocumentRow | undefined;
}

/** The keyed document with the greatest key (for dates: the newest briefing). */
export async function getLatestKeyedDocument(sql: Sql, projectId: string, docType: string): Promise<DocumentRow | undefined> {
  return (await sql.get("SELECT * FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key <> '' ORDER BY doc_key DESC LIMIT 1", [
    projectId,
    docType,
  ])) as DocumentRow | undefined;
}

/**
 * A project's documents without their content, by type, the greatest key first within a type (for
 * dates: the newest briefing), at most `limit`. Sorts only the project's rows (the unique index finds them).
 */
export async function listDocumentHeads(sql: Sql, projectId: string, limit: number): Promise<Omit<DocumentRow, 'content'>[]> {
  return (await sql.all(
    'SELECT id, project_id, doc_type, doc_key, version, updated_at FROM documents WHERE project_id = ? ORDER BY doc_type, doc_key DESC LIMIT ?',
    [projectId, limit],
  )) as Omit<DocumentRow, 'content'>[];
}

export type DocumentHead = Pick<DocumentRow, 'id' | 'version' | 'updated_at'>;

/** A document without its content (which can be large): enough to check a cache. `key` '' is the type's one document. */
export function getDocumentHead(sql: Sql, projectId: string, docType: string, key = ''): Promise<DocumentHead | undefined> {
  const text = 'SELECT id, version, updated_at FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ?';
  return sql.get<DocumentHead>(text, [projectId, docType, key]);
}

/**
 * `getDocumentHead`, the row locked until the transaction ends (Postgres): a write that plans the next
 * version from the current one holds it from the read to its update, so no other write's version can
 * land in between and be overwritten. SQLite's single writer already excludes that.
 */
export async function lockDocumentHead(sql: Sql, projectId: string, docType: string, key = ''): Promise<DocumentHead | undefined> {
  if (sql.dialect !== 'postgres') return getDocumentHead(sql, projectId, docType, key);
  return sql.get<DocumentHead>('SELECT id, version, updated_at FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ? FOR UPDATE', [
    projectId,
    docType,
    key,
  ]);
}

/** A document's content with the version and time it belongs to: read in one statement, so they match. */
export function getDocumentContent(sql: Sql, id: string): Promise<(DocumentHead & { content: string }) | undefined> {
  return sql.get<DocumentHead & { content: string }>('SELECT id, version, updated_at, content FROM documents WHERE id = ?', [id]);
}

/**
 * Writes a document's next version. Guarded by the version it was read at (optimistic concurrency):
 * throws StaleStateError if the document changed in between.
 */
export function updateDocumentContent(sql: Sql, p: { id: string; from_version: number; content: string; updated_at: number }): Promise<void> {
  return runGuarded(
    sql,
    `UPDATE documents SET content = @content, version = version + 1, updated_at = @updated_at
     WHERE id = @id AND version = @from_version`,
    p,
    `document ${p.id} is no longer at version ${p.from_version}`,
  );
}
