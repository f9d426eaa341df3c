/**
 * What an operation's functions may read, built from storage: the target project's documents
 * (parsed once per version and frozen, so no operation can change a value another one reads) and facts
 * about its threads. Read-only by construction: nothing here writes.
 */
import type { Sql } from '../../core/sql.js';
import { readParsedDocument, rememberDocument } from '../../db/document-cache.js';
import { countProjectThreadsByStatus, listProjectThreadsWithStatus } from '../../db/project-threads.js';
import { getProject } from '../../db/projects.js';
import type { ThreadRow } from '../../db/schema.js';
import type { TargetRef } from '../../domain/operations.js';
import type { Documents, ProjectInfo, ProjectThreads, PromptContext } from '../../operations/api.js';
import type { ReadAhead } from './read-ahead.js';

function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const v of Object.values(value)) deepFreeze(v);
  return Object.freeze(value);
}

/** Stored documents are JSON; the parsed value is shared between readers, hence frozen. */
export const parseDocumentJson = (content: string): unknown => deepFreeze(JSON.parse(content));

/** Records a document just written, so the next read needs no parse (see db/document-cache.ts). */
export function rememberWrittenDocument(sql: Sql, id: string, version: number, content: unknown): void {
  rememberDocument(sql, id, version, parseDocumentJson, deepFreeze(content));
}

/** The project's documents as an operation reads them: synchronously, loaded ahead (read-ahead.ts). */
export function documentsOf(sql: Sql, reads: ReadAhead, projectId: string): Documents {
  return {
    get(docType, key) {
      if (typeof docType !== 'string' || (key !== undefined && typeof key !== 'string')) throw new Error('documents.get(doc_type, key?) takes strings');
      return reads.read(
        `doc\0${docType}\0${key ?? ''}`,
        async () => (await readParsedDocument(sql, projectId, docType, parseDocumentJson, key ?? ''))?.value ?? null,
      );
    },
  };
}

const MAX_LISTED_THREADS = 100;

export function projectThreadsOf(sql: Sql, reads: ReadAhead, projectId: string): ProjectThreads {
  return {
    countByStatus(o) {
      const exclude = o?.exclude_kinds ?? [];
      return reads.read(`count\0${JSON.stringify(exclude)}`, async () =>
        Object.fromEntries((await countProjectThreadsByStatus(sql, projectId, exclude)).map((c) => [c.status, c.n])),
      );
    },
    list(o) {
      const limit = Math.max(0, Math.min(MAX_LISTED_THREADS, Math.floor(o.limit ?? 10)));
      const exclude = o.exclude_kinds ?? [];
      return reads.read(`list\0${JSON.stringify([o.statuses, exclude, limit])}`, async () =>
        (await listProjectThreadsWithStatus(sql, { projectId, statuses: o.statuses, exclude, limit })).map((t) => ({
          thread_id: t.id,
          kind: t.kind,
          status: t.status,
          target_ref: JSON.parse(t.target_ref) as TargetRef,
          error_code: t.error_code,
          created_at: new Date(t.created_at).toISOString(),
        })),
      );
    },
  };
}

export async function projectInfo(sql: Sql, projectId: string): Promise<ProjectInfo | null> {
  const p = await getProject(sql, projectId);
  return p ? { id: p.id, name: p.name } : null;
}

/** The prompt context of `input` against its target project (read with `projectInfo` first). */
export function promptContextFor(sql: Sql, reads: ReadAhead, project: ProjectInfo, input: unknown): PromptContext<unknown> {
  return { input, documents: documentsOf(sql, reads, project.id), project, threads: projectThreadsOf(sql, reads, project.id) };
}

export function threadTarget(thread: ThreadRow): TargetRef {
  return JSON.parse(thread.target_ref) as TargetRef;
}

export function threadInput(thread: ThreadRow): unknown {
  return deepFreeze(JSON.parse(thread.input));
}
