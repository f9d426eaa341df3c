/**
 * Any operation's steps inside the engine: the request of a thread's call, the check of its answer,
 * and the mutation the answer makes — the content from the definition's pure `apply`, the document's next
 * version written here, inside the completer's one transaction (the mutations row it returns is written
 * with the item's move to applied). The engine never branches on an operation: everything specific comes
 * from the definition.
 *
 * A definition's function that throws fails the work item permanently (its operation cannot do this
 * request); it never leaves a step half-done for recovery to resume.
 */
import type { Sql } from '../../core/sql.js';
import { lockDocumentHead } from '../../db/projects.js';
import { writeDocument } from './document-write.js';
import type { MutationRow, ProjectRow, ThreadRow, WorkItemRow } from '../../db/schema.js';
import type { ClassifiedError } from '../../domain/errors.js';
import { withResponseFormat, type ChatRequest } from '../../domain/prompts.js';
import type { OperationRegistry } from '../../operations/registry.js';
import { checkAnswer, countAnswerItems, planMutation, renderRequest } from '../../operations/runtime.js';
import { documentsOf, projectInfo, promptContextFor, rememberWrittenDocument, runReadingDocuments, threadInput, threadTarget } from './operation-context.js';
import { OperationCallError } from '../../core/errors.js';
import { newId } from '../../core/ids.js';

export type BuildResult = { ok: true; request: ChatRequest } | { ok: false; error: ClassifiedError };

export interface AppliedMutation {
  mutation_id: string;
  document_id: string;
  doc_type: string;
  key?: string;
  from_version: number;
  to_version: number;
  summary: Record<string, unknown>;
}

function permanent(code: 'UNKNOWN' | 'MUTATION_CONFLICT', message: string): ClassifiedError {
  return { code, class: 'permanent', message };
}

function unknownOperation(ops: OperationRegistry, thread: ThreadRow) {
  const op = ops.get(thread.kind);
  if (op) return { op, error: null };
  return {
    op: null,
    error: permanent('UNKNOWN', `no loaded operation runs threads of kind "${thread.kind}" (is its module still in COMBINE_HOME/operations?)`),
  };
}

/**
 * The request for this thread's call, or a permanent error when it cannot be built (its target is gone).
 * `known`: the target project's row as this transaction already read it (with the item), so it is not
 * read again; absent (or another project's), it is read here.
 */
export async function buildThreadRequest(sql: Sql, ops: OperationRegistry, thread: ThreadRow, known?: ProjectRow | null): Promise<BuildResult> {
  const { op, error } = unknownOperation(ops, thread);
  if (!op) return { ok: false, error };
  const target = threadTarget(thread);
  const project = known?.id === target.project_id ? { id: known.id, name: known.name } : await projectInfo(sql, target.project_id);
  if (!project) return { ok: false, error: permanent('UNKNOWN', `project ${target.project_id} no longer exists`) };
  const input = threadInput(thread);
  try {
    const rendered = await runReadingDocuments(sql, project.id, { op, fn: 'prompt' }, (reads) =>
      renderRequest(op, promptContextFor(sql, reads, project, input)),
    );
    // As the provider accepts it (config provider.response_format); the answer is validated either way.
    return { ok: true, request: withResponseFormat(rendered, op.params.responseFormat ?? 'json_schema') };
  } catch (err) {
    if (err instanceof OperationCallError) return { ok: false, error: permanent('UNKNOWN', err.message) };
    throw err;
  }
}

export type AnswerVerdict =
  | { kind: 'valid'; value: unknown; items: number; noun: string }
  | { kind: 'invalid'; errors: string[] }
  | { kind: 'failed'; error: ClassifiedError };

/** The answer's message content against the operation's output schema and rules. */
export function checkThreadAnswer(ops: OperationRegistry, thread: ThreadRow, content: string | null): AnswerVerdict {
  const { op, error } = unknownOperation(ops, thread);
  if (!op) return { kind: 'failed', error };
  try {
    const checked = checkAnswer(op, content);
    if (!checked.ok) return { kind: 'invalid', errors: checked.errors };
    return { kind: 'valid', value: checked.value, ...countAnswerItems(op, checked.value) };
  } catch (err) {
    if (err instanceof OperationCallError) return { kind: 'failed', error: permanent('UNKNOWN', err.message) };
    throw err;
  }
}

/**
 * Writes the answer's mutation: the target document's next version (version 1 when it did not exist).
 * Returns the mutation row for the caller to write with the item's move to applied (db/work-item-moves.ts
 * `markWorkItemApplied`: on Postgres one statement), unique per work item — a second application of one
 * item fails instead of applying twice. The row names the answer it applied (`responseSeq`: the charged
 * call's response), which is how usage tells an applied call from a wasted one. Returns MUTATION_CONFLICT
 * when the operation's `apply` throws or returns garbage.
 */
export async function applyThreadAnswer(
  sql: Sql,
  ops: OperationRegistry,
  thread: ThreadRow,
  item: WorkItemRow,
  answer: unknown,
  responseSeq: number,
  now: number,
): Promise<{ ok: true; mutation: AppliedMutation; row: MutationRow } | { ok: false; error: ClassifiedError }> {
  const { op, error } = unknownOperation(ops, thread);
  if (!op) return { ok: false, error };
  const target = threadTarget(thread);
  const key = target.key ?? '';
  const input = threadInput(thread);
  // Read (and on Postgres locked) before the plan: the plan's base is the version the update replaces.
  const head = await lockDocumentHead(sql, target.project_id, target.doc_type, key);
  let planned: ReturnType<typeof planMutation>;
  let current: unknown = null;
  const documentId = head?.id ?? newId(now);
  const fromVersion = head?.version ?? 0;
  try {
    // The target document is read first (`current`): loaded ahead with the ones `apply` read last time.
    planned = await runReadingDocuments(
      sql,
      target.project_id,
      { op, fn: 'apply' },
      (reads) => {
        const documents = documentsOf(sql, reads, target.project_id);
        current = documents.get(target.doc_type, key);
        return planMutation(op, {
          current,
          answer,
          input,
          documents,
          provenance: { thread_id: thread.id, work_item_id: item.id, at: now },
        });
      },
      [[target.doc_type, key]],
      { docType: target.doc_type, key, head },
    );
    const create = { id: documentId, project_id: target.project_id, doc_type: target.doc_type, doc_key: key };
    await writeDocument(sql, { operation: op.name, head, current, planned, create, now });
  } catch (err) {
    if (err instanceof OperationCallError) return { ok: false, error: permanent('MUTATION_CONFLICT', `the answer could not be applied: ${err.message}`) };
    throw err;
  }
  rememberWrittenDocument(sql, documentId, fromVersion + 1, planned.content);
  const mutation: AppliedMutation = {
    mutation_id: newId(now),
    document_id: documentId,
    doc_type: target.doc_type,
    ...(target.key !== undefined ? { key: target.key } : {}),
    from_version: fromVersion,
    to_version: fromVersion + 1,
    summary: planned.summary,
  };
  const row: MutationRow = {
    id: mutation.mutation_id,
    work_item_id: item.id,
    thread_id: thread.id,
    document_id: documentId,
    from_version: fromVersion,
    to_version: fromVersion + 1,
    summary: JSON.stringify(planned.summary),
    created_at: now,
    response_seq: responseSeq,
  };
  return { ok: true, mutation, row };
}
