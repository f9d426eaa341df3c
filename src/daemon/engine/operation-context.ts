/**
 * What an operation's functions may read, built from storage: the target project's documents
 * (parsed once per version and frozen, so no operation can change a value another one reads) and facts
 * about its threads. Read-only by construction: nothing here writes.
 */
import type { Db } from '../../db/connection.js';
import { readParsedDocument, rememberDocument } from '../../db/document-cache.js';
import { countProjectThreadsByStatus, listProjectThreadsWithStatus } from '../../db/project-threads.js';
import { getProject } from '../../db/projects.js';
import type { ThreadRow } from '../../db/schema.js';
import type { TargetRef } from '../../domain/operations.js';
import type { Documents, ProjectInfo, ProjectThreads, PromptContext } from '../../operations/api.js';

function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  for (const v of Object.values(value)) deepFreeze(v);
  return Object.freeze(value);
}

/** Stored documents are JSON; the parsed value is shared between readers, hence frozen. */
export const parseDocumentJson = (content: string): unknown => deepFreeze(JSON.parse(content));

/** Records a document just written, so the next read needs no parse (see db/document-cache.ts). */
export function rememberWrittenDocument(db: Db, id: string, version: number, content: unknown): void {
  rememberDocument(db, id, version, parseDocumentJson, deepFreeze(content));
}

export function documentsOf(db: Db, projectId: string): Documents {
  return {
    get(docType, key) {
      if (typeof docType !== 'string' || (key !== undefined && typeof key !== 'string')) throw new Error('documents.get(doc_type, key?) takes strings');
      return readParsedDocument(db, projectId, docType, parseDocumentJson, key ?? '')?.value ?? null;
    },
  };
}

const MAX_LISTED_THREADS = 100;

export function projectThreadsOf(db: Db, projectId: string): ProjectThreads {
  return {
    countByStatus(o) {
      return Object.fromEntries(countProjectThreadsByStatus(db, projectId, o?.exclude_kinds ?? []).map((c) => [c.status, c.n]));
    },
    list(o) {
      const limit = Math.max(0, Math.min(MAX_LISTED_THREADS, Math.floor(o.limit ?? 10)));
      return listProjectThreadsWithStatus(db, { projectId, statuses: o.statuses, exclude: o.exclude_kinds ?? [], limit }).map((t) => ({
        thread_id: t.id,
        kind: t.kind,
        status: t.status,
        target_ref: JSON.parse(t.target_ref) as TargetRef,
        error_code: t.error_code,
        created_at: new Date(t.created_at).toISOString(),
      }));
    },
  };
}

export function projectInfo(db: Db, projectId: string): ProjectInfo | null {
  const p = getProject(db, projectId);
  return p ? { id: p.id, name: p.name } : null;
}

/** The prompt context of `input` against its target project; null when the project does not exist. */
export function promptContextFor(db: Db, projectId: string, input: unknown): PromptContext<unknown> | null {
  const project = projectInfo(db, projectId);
  if (!project) return null;
  return { input, documents: documentsOf(db, projectId), project, threads: projectThreadsOf(db, projectId) };
}

export function threadTarget(thread: ThreadRow): TargetRef {
  return JSON.parse(thread.target_ref) as TargetRef;
}

export function threadInput(thread: ThreadRow): unknown {
  return deepFreeze(JSON.parse(thread.input));
}
