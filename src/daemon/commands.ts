/**
 * Commands: what a user asks for, recorded durably before it is acknowledged. Each command is one
 * writer transaction, so an acknowledged command is on disk and a refused one stored nothing.
 *
 * Idempotency (ADR-035 §8): a request's semantic key finds an active thread → that thread is returned
 * (`deduplicated: true`); a completed one → returned as is, no new work, unless `force`.
 */
import { newId } from '../db/ids.js';
import { acquireLock, getLock, releaseLock } from '../db/locks.js';
import { readParsedDocument } from '../db/document-cache.js';
import { getDocument, getProject, insertDocument, insertProject, renameProject, updateDocumentContent } from '../db/projects.js';
import type { ThreadRow, WorkItemRow } from '../db/schema.js';
import {
  adoptThread,
  findActiveThreadByKey,
  findLatestThreadByKeyAndStatus,
  getThread,
  insertThread,
  listChildThreads,
} from '../db/threads.js';
import { countQueuedWorkItems, getLatestWorkItem, insertWorkItem, listWorkItemsForThread, makeQueuedItemDueNow } from '../db/work-items.js';
import { EMPTY_BACKLOG } from '../domain/backlog.js';
import {
  EPIC_ARCHITECTURE,
  PRIORITY_BULK,
  PRIORITY_INTERACTIVE,
  STORY_BACKLOG,
  STORY_GENERATE_ALL,
  STORY_GENERATE_EPIC,
  allStoriesKey,
  epicLockScope,
  epicStoriesKey,
  projectLockScope,
  type TargetRef,
} from '../domain/operations.js';
import { parseEpicArchitecture, parseProjectFile, type Epic } from '../domain/project.js';
import type { RetryPolicy } from '../domain/retry.js';
import { isTerminalThread } from '../domain/states.js';
import { failAttempt, type CompleterContext } from './engine/completer.js';
import { isHeldInDoubt } from './holds.js';
import { closeParentIfDone, emitThread, emitWorkItem, endThread, moveThread, type Tx } from './engine/tx.js';

/** A refused command: `kind` decides the CLI's exit code (bad input → 2, conflict with state → 1). */
export class CommandError extends Error {
  constructor(
    readonly kind: 'BAD_REQUEST' | 'NOT_FOUND' | 'CONFLICT',
    message: string,
    readonly code?: string,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

export interface CommandResult {
  thread: ThreadRow;
  deduplicated: boolean;
}

export interface GenerateOptions {
  force: boolean;
  /** Backpressure: refuse (QUEUE_FULL) when the command would leave more than this many items queued. */
  maxQueued: number;
  /** Absolute time after which unstarted work fails with SKIPPED_DEADLINE. */
  deadlineAt: number | null;
  createdBy: string | null;
  /** Claim priority of the work items; defaults to interactive (one epic) or bulk (generate-all). */
  priority?: number;
}

/**
 * Backpressure (ADR-002 §4-2): called after a command's inserts, inside its transaction. Throwing rolls
 * the whole command back, so a refused command stores nothing, and an accepted one never leaves more
 * than `maxQueued` items queued.
 */
export function assertQueueHasRoom(tx: Tx, maxQueued: number): void {
  const queued = countQueuedWorkItems(tx.db);
  if (queued <= maxQueued) return;
  throw new CommandError(
    'CONFLICT',
    `QUEUE_FULL: the queue holds at most ${maxQueued} work items (engine.max_queued) and this command would make it ${queued}; nothing was stored, try again when work has drained`,
    'QUEUE_FULL',
  );
}

function epicsOf(tx: Tx, projectId: string): Epic[] {
  if (!getProject(tx.db, projectId)) throw new CommandError('NOT_FOUND', `no project "${projectId}" (see \`combine project list\`)`);
  return readParsedDocument(tx.db, projectId, EPIC_ARCHITECTURE, parseEpicArchitecture)?.value.epics ?? [];
}

/**
 * Creates the project (with its epic_architecture and an empty story_backlog) or, for a known id,
 * writes the epics as the architecture's next version. Validates everything before writing anything.
 */
export function importProject(tx: Tx, file: unknown) {
  const parsed = parseProjectFile(file);
  if (!parsed.ok) throw new CommandError('BAD_REQUEST', `invalid project file:\n  ${parsed.errors.join('\n  ')}`);
  const p = parsed.value;
  const content = JSON.stringify({ epics: p.epics });
  const existing = getProject(tx.db, p.id);
  if (!existing) {
    insertProject(tx.db, { id: p.id, name: p.name, created_at: tx.now });
    insertDocument(tx.db, { id: newId(), project_id: p.id, doc_type: EPIC_ARCHITECTURE, version: 1, content, updated_at: tx.now });
    insertDocument(tx.db, {
      id: newId(),
      project_id: p.id,
      doc_type: STORY_BACKLOG,
      version: 1,
      content: JSON.stringify(EMPTY_BACKLOG),
      updated_at: tx.now,
    });
    return { project_id: p.id, result: 'created' as const, epics: p.epics.length, version: 1 };
  }
  if (existing.name !== p.name) renameProject(tx.db, p.id, p.name);
  const doc = getDocument(tx.db, p.id, EPIC_ARCHITECTURE)!;
  if (doc.content === content) return { project_id: p.id, result: 'unchanged' as const, epics: p.epics.length, version: doc.version };
  updateDocumentContent(tx.db, { id: doc.id, from_version: doc.version, content, updated_at: tx.now });
  return { project_id: p.id, result: 'updated' as const, epics: p.epics.length, version: doc.version + 1 };
}

export function newThread(tx: Tx, p: { kind: string; projectId: string; target: TargetRef; key: string; parentId: string | null; createdBy: string | null }): ThreadRow {
  const row: ThreadRow = {
    id: newId(),
    kind: p.kind,
    space_type: 'project',
    space_id: p.projectId,
    target_ref: JSON.stringify(p.target),
    status: 'open',
    parent_thread_id: p.parentId,
    idempotency_key: p.key,
    created_by: p.createdBy,
    created_at: tx.now,
    closed_at: null,
  };
  insertThread(tx.db, row);
  emitThread(tx, row);
  return row;
}

export function enqueueWorkItem(tx: Tx, thread: ThreadRow, p: { sequence: number; lockScope: string; priority: number; policy: RetryPolicy; deadlineAt: number | null }): WorkItemRow {
  const item: WorkItemRow = {
    id: newId(),
    thread_id: thread.id,
    sequence: p.sequence,
    status: 'queued',
    attempt: 1,
    max_attempts: p.policy.maxAttempts,
    repair_count: 0,
    lock_scope: p.lockScope,
    project_id: thread.space_id,
    priority: p.priority,
    not_before: tx.now,
    deadline_at: p.deadlineAt,
    lease_owner: null,
    lease_expires_at: null,
    error_code: null,
    error_message: null,
    created_at: tx.now,
    started_at: null,
    finished_at: null,
  };
  insertWorkItem(tx.db, item);
  emitWorkItem(tx, thread, item);
  return item;
}

/** The existing thread that answers this request, if idempotency says one does. */
function existingThread(tx: Tx, key: string, force: boolean): ThreadRow | undefined {
  return findActiveThreadByKey(tx.db, key) ?? (force ? undefined : findLatestThreadByKeyAndStatus(tx.db, key, 'complete'));
}

export function generateEpic(tx: Tx, policy: RetryPolicy, projectId: string, epicId: string, o: GenerateOptions): CommandResult {
  const epic = epicsOf(tx, projectId).find((e) => e.id === epicId);
  if (!epic) throw new CommandError('NOT_FOUND', `project "${projectId}" has no epic "${epicId}" (see \`combine project show ${projectId}\`)`);
  const key = epicStoriesKey(projectId, epicId);
  const found = existingThread(tx, key, o.force);
  if (found) return { thread: found, deduplicated: true };
  const thread = newThread(tx, {
    kind: STORY_GENERATE_EPIC,
    projectId,
    target: { doc_type: STORY_BACKLOG, project_id: projectId, epic_id: epicId },
    key,
    parentId: null,
    createdBy: o.createdBy,
  });
  enqueueWorkItem(tx, thread, { sequence: 1, lockScope: epicLockScope(projectId, epicId), priority: o.priority ?? PRIORITY_INTERACTIVE, policy, deadlineAt: o.deadlineAt });
  assertQueueHasRoom(tx, o.maxQueued);
  return { thread, deduplicated: false };
}

/**
 * The orchestration: a parent holding `project:{id}` and one child per epic, each child with the same
 * key as a single-epic request, so idempotency holds per epic too (ADR-035 §8): an epic already being
 * generated on its own is adopted, and one whose request is already being answered elsewhere or has
 * completed is reused as it is — not run, not paid for again. Only `force` regenerates every epic.
 */
export function generateAll(tx: Tx, policy: RetryPolicy, projectId: string, o: GenerateOptions): CommandResult {
  const epics = epicsOf(tx, projectId);
  const key = allStoriesKey(projectId);
  const found = existingThread(tx, key, o.force);
  if (found) return { thread: found, deduplicated: true };
  const parent = newThread(tx, {
    kind: STORY_GENERATE_ALL,
    projectId,
    target: { doc_type: STORY_BACKLOG, project_id: projectId },
    key,
    parentId: null,
    createdBy: o.createdBy,
  });
  // Lock order: the project lock is taken here, while this transaction holds no epic lock.
  const scope = projectLockScope(projectId);
  if (!acquireLock(tx.db, { scope, owner: parent.id, now: tx.now, expires_at: null })) {
    const holder = getLock(tx.db, scope);
    throw new CommandError('CONFLICT', `project "${projectId}" is locked by thread ${holder?.owner}`, 'LOCKED');
  }
  let children = 0;
  for (const epic of epics) {
    const childKey = epicStoriesKey(projectId, epic.id);
    const active = findActiveThreadByKey(tx.db, childKey);
    if (active && active.parent_thread_id === null) {
      adoptThread(tx.db, active.id, parent.id);
      children++;
      continue;
    }
    // Another orchestration's child still running, or a completed request: reused, not a child of this one.
    if (active || (!o.force && findLatestThreadByKeyAndStatus(tx.db, childKey, 'complete'))) continue;
    children++;
    const child = newThread(tx, {
      kind: STORY_GENERATE_EPIC,
      projectId,
      target: { doc_type: STORY_BACKLOG, project_id: projectId, epic_id: epic.id },
      key: childKey,
      parentId: parent.id,
      createdBy: o.createdBy,
    });
    enqueueWorkItem(tx, child, { sequence: 1, lockScope: epicLockScope(projectId, epic.id), priority: o.priority ?? PRIORITY_BULK, policy, deadlineAt: o.deadlineAt });
  }
  if (children === 0) {
    // Nothing to run: every epic's stories are already generated (or there are no epics).
    moveThread(tx, parent, 'complete');
    releaseLock(tx.db, scope, parent.id);
  }
  // After the inserts, so the whole orchestration is refused as one: the savepoint rolls all of it back.
  assertQueueHasRoom(tx, o.maxQueued);
  return { thread: getThread(tx.db, parent.id)!, deduplicated: false };
}

/**
 * `combine retry`: a failed thread gets a new work item (next sequence) and reopens; a failed
 * orchestration retries each failed child. Active, complete and canceled threads are refused.
 */
export function retryThread(tx: Tx, policyFor: (kind: string) => RetryPolicy, threadId: string, maxQueued: number): ThreadRow {
  const thread = getThread(tx.db, threadId);
  if (!thread) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
  // A running thread whose item waits (a provider's long Retry-After): the user says "now".
  if (!isTerminalThread(thread.status) && makeWaitingItemsDue(tx, thread) > 0) return getThread(tx.db, thread.id)!;
  if (thread.status !== 'failed') {
    const why = isTerminalThread(thread.status) ? `it is ${thread.status}` : `it is still ${thread.status}`;
    throw new CommandError('CONFLICT', `cannot retry thread ${threadId}: ${why}; only failed threads can be retried`);
  }
  const newer = findActiveThreadByKey(tx.db, thread.idempotency_key);
  if (newer) throw new CommandError('CONFLICT', `cannot retry thread ${threadId}: thread ${newer.id} is already working on the same request`);
  if (thread.kind === STORY_GENERATE_ALL) {
    const failedChildren = listChildThreads(tx.db, thread.id).filter((c) => c.status === 'failed');
    const scope = projectLockScope(thread.space_id);
    if (!acquireLock(tx.db, { scope, owner: thread.id, now: tx.now, expires_at: null })) {
      throw new CommandError('CONFLICT', `project "${thread.space_id}" is locked by another orchestration`, 'LOCKED');
    }
    const reopened = moveThread(tx, thread, 'running');
    for (const child of failedChildren) retryChild(tx, policyFor, child);
    closeParentIfDone(tx, reopened.id);
    assertQueueHasRoom(tx, maxQueued);
    return getThread(tx.db, thread.id)!;
  }
  reopenFailedParent(tx, thread, 'retry');
  retryChild(tx, policyFor, thread);
  assertQueueHasRoom(tx, maxQueued);
  return getThread(tx.db, thread.id)!;
}

/** Makes the waiting (queued, not yet due) items of a thread, or of an orchestration's children, due now. */
function makeWaitingItemsDue(tx: Tx, thread: ThreadRow): number {
  const threads = thread.kind === STORY_GENERATE_ALL ? listChildThreads(tx.db, thread.id).filter((c) => !isTerminalThread(c.status)) : [thread];
  let released = 0;
  for (const t of threads) {
    const item = getLatestWorkItem(tx.db, t.id);
    if (item?.status === 'queued' && makeQueuedItemDueNow(tx.db, { id: item.id, now: tx.now })) {
      emitWorkItem(tx, t, { ...item, not_before: tx.now });
      released++;
    }
  }
  return released;
}

/** A failed child reopening reopens its failed orchestration too (and takes its project lock back). */
export function reopenFailedParent(tx: Tx, thread: ThreadRow, verb: string): void {
  if (!thread.parent_thread_id) return;
  const parent = getThread(tx.db, thread.parent_thread_id);
  if (parent?.status !== 'failed') return;
  if (findActiveThreadByKey(tx.db, parent.idempotency_key)) {
    throw new CommandError('CONFLICT', `cannot ${verb} thread ${thread.id}: a newer orchestration for project "${parent.space_id}" is running`);
  }
  moveThread(tx, parent, 'running');
  acquireLock(tx.db, { scope: projectLockScope(parent.space_id), owner: parent.id, now: tx.now, expires_at: null });
}

/** Reopens a failed epic thread with a new work item (next sequence), queued now. */
export function retryChild(tx: Tx, policyFor: (kind: string) => RetryPolicy, thread: ThreadRow): WorkItemRow {
  const last = getLatestWorkItem(tx.db, thread.id);
  if (!last) throw new Error(`thread ${thread.id} has no work item to retry`);
  const reopened = moveThread(tx, thread, 'open');
  return enqueueWorkItem(tx, reopened, {
    sequence: last.sequence + 1,
    lockScope: last.lock_scope,
    priority: last.priority,
    policy: policyFor(thread.kind),
    deadlineAt: null,
  });
}

/**
 * `combine cancel`: the thread (and, for an orchestration, every active child) becomes canceled; queued
 * items end at once. Returns the ids of leased items whose in-flight calls the engine must abort; their
 * pipelines record `CANCELED` when the abort lands.
 */
export function cancelThread(tx: Tx, ctx: CompleterContext, threadId: string): { thread: ThreadRow; abort: string[] } {
  const thread = getThread(tx.db, threadId);
  if (!thread) throw new CommandError('NOT_FOUND', `no thread "${threadId}"`);
  if (thread.status === 'canceled') return { thread, abort: [] };
  if (thread.status === 'failed' && giveUpCallsInDoubt(tx, thread)) return { thread: getThread(tx.db, threadId)!, abort: [] };
  if (isTerminalThread(thread.status)) {
    throw new CommandError('CONFLICT', `cannot cancel thread ${threadId}: it is already ${thread.status}`);
  }
  const abort: string[] = [];
  const targets = thread.kind === STORY_GENERATE_ALL ? listChildThreads(tx.db, thread.id).filter((c) => !isTerminalThread(c.status)) : [];
  if (thread.kind === STORY_GENERATE_ALL) {
    moveThread(tx, thread, 'canceled');
    releaseLock(tx.db, projectLockScope(thread.space_id), thread.id);
  }
  for (const t of thread.kind === STORY_GENERATE_ALL ? targets : [thread]) {
    for (const item of listWorkItemsForThread(tx.db, t.id)) {
      if (item.status === 'queued') {
        failAttempt(tx, ctx, item, { code: 'CANCELED', class: 'canceled', message: 'canceled by the user before it started' });
      } else if (item.status === 'claimed' || item.status === 'running') {
        abort.push(item.id);
      }
    }
    endThread(tx, t.id, 'canceled');
  }
  return { thread: getThread(tx.db, threadId)!, abort };
}

/**
 * `combine cancel` of a failed thread whose call is held in doubt (at-most-once): the user gives it up
 * instead of paying again. The held threads (for an orchestration, its held children) and the
 * orchestration itself end `canceled`. False when nothing is held (the thread simply failed).
 */
function giveUpCallsInDoubt(tx: Tx, thread: ThreadRow): boolean {
  const parent = thread.kind === STORY_GENERATE_ALL;
  const candidates = parent ? listChildThreads(tx.db, thread.id).filter((c) => c.status === 'failed') : [thread];
  const held = candidates.filter((t) => isHeldInDoubt(getLatestWorkItem(tx.db, t.id)));
  if (held.length === 0) return false;
  for (const t of held) moveThread(tx, t, 'canceled');
  if (parent) moveThread(tx, getThread(tx.db, thread.id)!, 'canceled');
  return true;
}
