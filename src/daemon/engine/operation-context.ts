/**
 * What an operation's functions may read, built from storage: the target project's documents
 * (parsed once per version and frozen, so no operation can change a value another one reads) and facts
 * about its threads. Read-only by construction: nothing here writes.
 */
import type { Sql } from '../../core/sql.js';
import { documentValueAt, readDocumentValue, rememberDocument } from '../../db/document-cache.js';
import type { DocumentHead, DocumentTarget } from '../../db/projects.js';
import { countProjectThreadsByStatus, listProjectThreadsWithStatus } from '../../db/project-threads.js';
import { getProject } from '../../db/projects.js';
import type { ThreadRow } from '../../db/schema.js';
import type { TargetRef } from '../../domain/operations.js';
import type { Documents, ProjectInfo, ProjectThreads, PromptContext } from '../../operations/api.js';
import type { Operation } from '../../operations/registry.js';
import { ReadAhead, runWithReads } from './read-ahead.js';

/** Freezes a JSON value and everything in it (a frozen part, already walked, is not walked again). */
function deepFreeze<T>(value: T): T {
  if (typeof value !== 'object' || value === null || Object.isFrozen(value)) return value;
  // Walked in place: an Object.values array per object and array showed in the allocation profile.
  if (Array.isArray(value)) for (let i = 0; i < value.length; i++) deepFreeze(value[i]);
  else for (const key of Object.keys(value)) deepFreeze((value as Record<string, unknown>)[key]);
  return Object.freeze(value);
}

/**
 * Stored documents are JSON; the parsed value is shared between readers, hence frozen. A document
 * stored in parts can be put together from its parts (db/document-cache.ts), the frozen elements of a
 * version already parsed kept as they are (deepFreeze does not walk them again).
 */
export const parseDocumentJson = Object.assign((content: string): unknown => deepFreeze(JSON.parse(content)), {
  parts: {
    element: (text: string): unknown => deepFreeze(JSON.parse(text)),
    assemble: (head: string, field: string, elements: unknown[]): unknown => deepFreeze({ ...(JSON.parse(head) as object), [field]: elements }),
  },
});

/** Records a document just written, so the next read needs no parse (see db/document-cache.ts). */
export function rememberWrittenDocument(sql: Sql, id: string, version: number, content: unknown): void {
  rememberDocument(sql, id, version, parseDocumentJson, deepFreeze(content));
}

const DOC = 'doc\0';
const documentKey = (docType: string, key: string) => `${DOC}${docType}\0${key}`;
const documentLoader = (sql: Sql, projectId: string, docType: string, key: string) => () => readDocumentValue(sql, projectId, docType, parseDocumentJson, key);

/** The project's documents as an operation reads them: synchronously, loaded ahead (read-ahead.ts). */
export function documentsOf(sql: Sql, reads: ReadAhead, projectId: string): Documents {
  return {
    get(docType, key) {
      if (typeof docType !== 'string' || (key !== undefined && typeof key !== 'string')) throw new Error('documents.get(doc_type, key?) takes strings');
      return reads.read(documentKey(docType, key ?? ''), documentLoader(sql, projectId, docType, key ?? ''));
    },
  };
}

/** The documents (type, key) each operation's function read on its previous call. */
const documentsReadBefore = new WeakMap<Operation, Map<string, (readonly [string, string])[]>>();

/**
 * `runWithReads` for one of `op`'s functions (`fn`: 'prompt', 'apply', …) over `projectId`'s
 * documents, with the documents it read on its previous call — and `expected`, which the caller knows
 * it reads — loaded before the first run: a read not loaded ahead costs one more run of the function,
 * and a function usually reads the same document types every time. A guess that was wrong only costs
 * its read.
 */
export async function runReadingDocuments<T>(
  sql: Sql,
  projectId: string,
  site: { op: Operation; fn: string },
  run: (reads: ReadAhead) => T,
  expected: readonly (readonly [string, string])[] = [],
  known?: { docType: string; key: string; head: DocumentHead | undefined },
): Promise<T> {
  const reads = new ReadAhead();
  // A document whose head the caller read in this transaction: its value without a second read.
  if (known) {
    const value = documentValueAt(sql, known.head, parseDocumentJson);
    reads.put(documentKey(known.docType, known.key), value instanceof Promise ? await value : value);
  }
  const before = documentsReadBefore.get(site.op)?.get(site.fn) ?? [];
  for (const [docType, key] of [...expected, ...before]) {
    const k = documentKey(docType, key);
    // `expected` is usually in `before` too: no await for a key already loaded.
    if (!reads.has(k)) reads.put(k, await readDocumentValue(sql, projectId, docType, parseDocumentJson, key));
  }
  const result = await runWithReads(run, reads);
  // Nothing loaded beyond what the previous call read (the usual call): its list stays as it is.
  if (reads.size === before.length) return result;
  const read = reads
    .loadedKeys()
    .filter((k) => k.startsWith(DOC))
    .map((k) => {
      const [docType = '', key = ''] = k.slice(DOC.length).split('\0');
      return [docType, key] as const;
    });
  const byFn = documentsReadBefore.get(site.op) ?? new Map<string, (readonly [string, string])[]>();
  byFn.set(site.fn, read);
  documentsReadBefore.set(site.op, byFn);
  return result;
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

/** The document the thread's answer is applied to, as the apply reads it (`doc_key` '': the project's one document of its type). */
export function documentTargetOf(thread: ThreadRow): DocumentTarget {
  const target = threadTarget(thread);
  return { project_id: target.project_id, doc_type: target.doc_type, doc_key: target.key ?? '' };
}

export function threadInput(thread: ThreadRow): unknown {
  return deepFreeze(JSON.parse(thread.input));
}
