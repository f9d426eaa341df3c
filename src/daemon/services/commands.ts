/**
 * Commands on existing state: import a project, retry and cancel threads. Each command is one writer
 * transaction, so an acknowledged command is on disk and a refused one stored nothing. New work is
 * requested through submit.ts.
 */
import { acquireLock, releaseLocksOwnedBy } from '../../db/locks.js';
import { getDocument, getProject, insertDocument, insertProject, renameProject, updateDocumentContent } from '../../db/projects.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { findActiveThreadByKey, getThread, listChildThreads, lockThread } from '../../db/threads.js';
import { countQueuedWorkItems, getLatestWorkItem, listLeasedWorkItemsOfThreads } from '../../db/work-items.js';
import { makeQueuedItemDueNow } from '../../db/work-item-claims.js';
import { endQueuedWorkItemsOfThreads } from '../../db/work-item-moves.js';
import { EMPTY_BACKLOG, STORY_BACKLOG } from '../../domain/backlog.js';
import { EPIC_ARCHITECTURE, parseProjectFile } from '../../domain/project.js';
import { isTerminalThread } from '../../domain/states.js';
import type { OperationRegistry } from '../../operations/registry.js';
import { lockScopeOf } from '../../operations/runtime.js';
import { errorPayload } from '../engine/failures.js';
import type { ClassifiedError } from '../../domain/errors.js';
import { isHeldInDoubt } from './holds.js';
import { cancelOrchestration, cancelThreads, closeParentIfDone, emitWorkItem, endThreads, moveThread, type Tx } from '../engine/tx.js';
import { appendEntries } from '../engine/ledger-append.js';
import { enqueueWorkItem } from '../engine/enqueue.js';
import { threadInput } from '../engine/operation-context.js';
import { OperationCallError } from '../../core/errors.js';
import { newId } from '../../core/ids.js';
import { CommandError } from '../../core/errors.js';

export interface CommandResult {
  thread: ThreadRow;
  deduplicated: boolean;
  /** The thread this forced request replaced before its call started (see supersede.ts). */
  superseded?: string;
}

/**
 * Backpressure (ADR-002 §4-2): called after a command's inserts, inside its transaction. Throwing rolls
 * the whole command back, so a refused command stores nothing, and an accepted one never leaves more
 * than `maxQueued` items queued.
 */
export async function assertQueueHasRoom(tx: Tx, maxQueued: number): Promise<void> {
  const queued = await countQueuedWorkItems(tx.sql);
  if (queued <= maxQueued) return;
  throw new CommandError(
    'CONFLICT',
    `QUEUE_FULL: the queue holds at most ${maxQueued} work items (engine.max_queued) and this command would make it ${queued}; nothing was stored, try again when work has drained`,
    'QUEUE_FULL',
  );
}

/**
 * Creates the project (with its epic_architecture and an empty story_backlog) or, for a known id,
 * writes the epics as the architecture's next version. Validates everything before writing anything.
 */
export async function importProject(tx: Tx, file: unknown) {
  const parsed = parseProjectFile(file);
  if (!parsed.ok) throw new CommandError('BAD_REQUEST', `invalid project file:\n  ${parsed.errors.join('\n  ')}`);
  const p = parsed.value;
  const content = JSON.stringify({ epics: p.epics });
  const existing = await getProject(tx.sql, p.id);
  if (!existing) {
    await insertProject(tx.sql, { id: p.id, name: p.name, created_at: tx.now });
    await insertDocument(tx.sql, { id: newId(tx.now), project_id: p.id, doc_type: EPIC_ARCHITECTURE, version: 1, content, updated_at: tx.now });
    await insertDocument(tx.sql, {
      id: newId(tx.now),
      project_id: p.id,
      doc_type: STORY_BACKLOG,
      version: 1,
      content: JSON.stringify(EMPTY_BACKLOG),
      updated_at: tx.now,
    });
    return { project_id: p.id, result: 'created' as const, epics: p.epics.length, version: 1 };
  }
  if (existing.name !== p.name) await renameProject(tx.sql, p.id, p.name);
  const doc = (await getDocument(tx.sql, p.id, EPIC_ARCHITECTURE))!;
  if (doc.content === content) return { project_id: p.id, result: 'unchanged' as const, epics: p.epics.length, version: doc.version };
  await updateDocumentContent(tx.sql, { id: doc.id, from_version: doc.version, content, updated_at: tx.now });
  return { project_id: p.id, result: 'updated' as const, epics: p.epics.length, version: doc.version + 1 };
}

/** Takes an orchestration's lock (back): its operation names the scope. */
async function takeOrchestrationLock(tx: Tx, ops: OperationRegistry, parent: ThreadRow, verb: string): Promise<void> {
  let scope: string;
  try {
    scope = lockScopeOf(ops.require(parent.kind), threadInput(parent));
  } catch (err) {
    throw new CommandError('CONFLICT', `cannot ${verb} thread ${parent.id}: ${err instanceof OperationCallError ? err.message : (err as Error).message}`);
  }
  if (!(await acquireLock(tx.sql, { scope, owner: parent.id, now: tx.now, expires_at: null }))) {
    throw new CommandError('CONFLICT', `cannot ${verb} thread ${parent.id}: ${scope} is locked by another orchestration`, 'LOCKED');
  }
}

/**
 * `combine retry`: a failed thread gets a new work item (next sequence) and reopens; a failed
 * orchestration retries each failed child. Active, complete and canceled threads are refused.
 */
export async function retryThread(tx: Tx, ops: OperationRegistry, threadId: string, maxQueued: number): Promise<ThreadRow> {
  const thread = await getThread(tx.sql, threadId);
  if (!thread) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
  // A running thread whose item waits (a provider's long Retry-After): the user says "now".
  if (!isTerminalThread(thread.status) && (await makeWaitingItemsDue(tx, thread)) > 0) return (await getThread(tx.sql, thread.id))!;
  if (thread.status !== 'failed') {
    const why = isTerminalThread(thread.status) ? `it is ${thread.status}` : `it is still ${thread.status}`;
    throw new CommandError('CONFLICT', `cannot retry thread ${threadId}: ${why}; only failed threads can be retried`);
  }
  const newer = await findActiveThreadByKey(tx.sql, thread.idempotency_key);
  if (newer) throw new CommandError('CONFLICT', `cannot retry thread ${threadId}: thread ${newer.id} is already working on the same request`);
  if (thread.role === 'orchestration') {
    const failedChildren = (await listChildThreads(tx.sql, thread.id)).filter((c) => c.status === 'failed');
    await takeOrchestrationLock(tx, ops, thread, 'retry');
    // The children before their orchestration: the lock order of engine/tx.ts.
    for (const child of failedChildren) await retryChild(tx, ops, child);
    const reopened = await moveThread(tx, thread, 'running');
    await closeParentIfDone(tx, reopened.id);
    await assertQueueHasRoom(tx, maxQueued);
    return (await getThread(tx.sql, thread.id))!;
  }
  await retryChild(tx, ops, thread);
  await reopenFailedParent(tx, ops, thread, 'retry');
  await assertQueueHasRoom(tx, maxQueued);
  return (await getThread(tx.sql, thread.id))!;
}

/** Makes the waiting (queued, not yet due) items of a thread, or of an orchestration's children, due now. */
async function makeWaitingItemsDue(tx: Tx, thread: ThreadRow): Promise<number> {
  const threads = thread.role === 'orchestration' ? (await listChildThreads(tx.sql, thread.id)).filter((c) => !isTerminalThread(c.status)) : [thread];
  let released = 0;
  for (const t of threads) {
    const item = await getLatestWorkItem(tx.sql, t.id);
    if (item?.status === 'queued' && (await makeQueuedItemDueNow(tx.sql, { id: item.id, now: tx.now }))) {
      emitWorkItem(tx, t, { ...item, not_before: tx.now });
      released++;
    }
  }
  return released;
}

/**
 * A failed child reopening reopens its failed orchestration too (and takes its lock back). The parent
 * is read locked (Postgres): two children retried at once by two transactions reopen it once — the second
 * sees it running, where reading it unlocked it saw it failed, then found it running as "a newer request".
 * Called after the child reopened (`retryChild`): a child's row before its parent's, the lock order of
 * engine/tx.ts.
 */
export async function reopenFailedParent(tx: Tx, ops: OperationRegistry, thread: ThreadRow, verb: string): Promise<void> {
  if (!thread.parent_thread_id) return;
  const parent = await lockThread(tx.sql, thread.parent_thread_id);
  if (parent?.status !== 'failed') return;
  if (await findActiveThreadByKey(tx.sql, parent.idempotency_key)) {
    throw new CommandError('CONFLICT', `cannot ${verb} thread ${thread.id}: a newer ${parent.kind} for the same request is running`);
  }
  await takeOrchestrationLock(tx, ops, parent, verb);
  await moveThread(tx, parent, 'running');
}

/** Reopens a failed thread with a new work item (next sequence), queued now. */
export async function retryChild(tx: Tx, ops: OperationRegistry, thread: ThreadRow): Promise<WorkItemRow> {
  const last = await getLatestWorkItem(tx.sql, thread.id);
  if (!last) throw new Error(`thread ${thread.id} has no work item to retry`);
  const reopened = await moveThread(tx, thread, 'open');
  return await enqueueWorkItem(tx, reopened, {
    sequence: last.sequence + 1,
    lockScope: last.lock_scope,
    priority: last.priority,
    policy: ops.policyFor(thread.kind),
    deadlineAt: null,
  });
}

/**
 * `combine cancel`: the thread (and, for an orchestration, every active child) becomes canceled; queued
 * items end at once. Returns the ids of leased items whose in-flight calls the engine must abort; their
 * pipelines record `CANCELED` when the abort lands.
 */
export async function cancelThread(tx: Tx, threadId: string): Promise<{ thread: ThreadRow; abort: string[] }> {
  const thread = await getThread(tx.sql, threadId);
  if (!thread) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
  if (thread.status === 'canceled') return { thread, abort: [] };
  if (thread.status === 'failed' && (await giveUpCallsInDoubt(tx, thread))) return { thread: (await getThread(tx.sql, threadId))!, abort: [] };
  if (isTerminalThread(thread.status)) {
    throw new CommandError('CONFLICT', `cannot cancel thread ${threadId}: it is already ${thread.status}`);
  }
  const orchestration = thread.role === 'orchestration';
  const targets = orchestration ? (await listChildThreads(tx.sql, thread.id)).filter((c) => !isTerminalThread(c.status)) : [thread];
  // Set-based: a generate-all of 10,000 children is canceled in a few statements, not ten per child. The
  // guarded UPDATEs decide, and what they changed is recorded: an item another daemon claims meanwhile is
  // leased (aborted below), a child it finishes meanwhile keeps its end. Items, then children, then the
  // orchestration: the lock order of every write that changes a child and its parent (engine/tx.ts).
  const threadIds = targets.map((t) => t.id);
  const ended = await endQueuedWorkItemsOfThreads(tx.sql, { threadIds, error_code: CANCELED.code, error_message: CANCELED.message, now: tx.now });
  if (orchestration) {
    await cancelOrchestration(tx, thread, threadIds);
    await releaseLocksOwnedBy(tx.sql, thread.id);
  } else await cancelThreads(tx, threadIds);
  // Leased items: their pipelines record CANCELED when the abort of their calls lands.
  const abort = (await listLeasedWorkItemsOfThreads(tx.sql, threadIds)).map((i) => i.id);
  recordCanceledItems(tx, new Map(targets.map((t) => [t.id, t])), ended);
  return { thread: (await getThread(tx.sql, threadId))!, abort };
}

/**
 * `combine cancel` of a failed thread whose call is held in doubt (at-most-once): the user gives it up
 * instead of paying again. The held threads (for an orchestration, its held children) and the
 * orchestration itself end `canceled`. False when nothing is held (the thread simply failed).
 */
async function giveUpCallsInDoubt(tx: Tx, thread: ThreadRow): Promise<boolean> {
  const parent = thread.role === 'orchestration';
  const candidates = parent ? (await listChildThreads(tx.sql, thread.id)).filter((c) => c.status === 'failed') : [thread];
  const held: ThreadRow[] = [];
  for (const t of candidates) if (isHeldInDoubt(await getLatestWorkItem(tx.sql, t.id))) held.push(t);
  if (held.length === 0) return false;
  // Every held child, then the orchestration: the lock order of engine/tx.ts.
  await endThreads(tx, held, 'canceled');
  if (parent) await moveThread(tx, (await getThread(tx.sql, thread.id))!, 'canceled');
  return true;
}

const CANCELED: ClassifiedError = { code: 'CANCELED', class: 'canceled', message: 'canceled by the user before it started' };

/**
 * The CANCELED `error` entries of queued items (never leased: no call, no lock) a cancel ended, appended
 * as one batch — the transaction's last statements, so the chain head is held only to its commit.
 */
function recordCanceledItems(tx: Tx, threadOf: ReadonlyMap<string, ThreadRow>, ended: readonly WorkItemRow[]): void {
  appendEntries(
    tx,
    ended.map((item) => ({
      thread: threadOf.get(item.thread_id)!,
      workItemId: item.id,
      entryType: 'error',
      attempt: item.attempt,
      payload: { ...errorPayload(CANCELED, item), next: 'canceled' },
    })),
  );
  for (const item of ended) emitWorkItem(tx, threadOf.get(item.thread_id)!, item);
}
