/**
 * What every step of a leased item starts from: the engine's context, the item read back under its
 * lease (a step of a worker that lost its lease fails loudly, StaleStateError, instead of completing the
 * item twice), its thread, and the release of its scope's lock when the lease ends.
 */
import type { CrashAt } from '../../core/crash.js';
import { StaleStateError } from '../../core/errors.js';
import { lockWorkItemsWithThreads, lockWorkItemWithThread, type ItemWithThread, type ReadAhead } from '../../db/item-with-thread.js';
import { writeDocumentsAgain } from '../../db/document-parts-queued.js';
import { releaseHeldLock, type HeldLock } from '../../db/locks.js';
import { lockDocumentHeads } from '../../db/projects.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { getThread } from '../../db/threads.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { ModelRoute } from '../routing/router.js';
import { lockProjectBudget, type PriceOf } from './charges.js';
import { endThreadLater } from './ends-together.js';
import { documentTargetOf } from './operation-context.js';
import { endThread, type EndedStatus, type Tx } from './tx.js';

/** Where a recorded answer (or a failed attempt) took the item. */
export type AnswerResult = 'applied' | 'repair' | 'escalate' | 'retry' | 'dead_letter' | 'canceled' | 'held';

/** What every engine step works with; built once by the composition root (app.ts). */
export interface EngineContext {
  /** This daemon's lease owner id. */
  owner: string;
  /** A logical model's route: the model and endpoint a call goes to (routing/router.ts). */
  routeOf(logical: string): ModelRoute;
  /** The operations this daemon runs: every thread's prompt, answer check, mutation and retry policy. */
  operations: OperationRegistry;
  /** Answer identical temperature-0 requests from recorded answers (config `cache`). */
  cache: boolean;
  random: () => number;
  /** The price table, to settle a call's cost from its usage. */
  priceOf: PriceOf;
  /** Crash tests' hook (a no-op in the shipped bundle): `in_mutation` runs before the mutation commits. */
  crashAt: CrashAt;
}

/**
 * A leased item holds its scope's lock (taken with the lease, extended with it): the step that ends the
 * lease releases it, and a lock that is not there any more means another item may have held the scope
 * meanwhile — refused (StaleStateError: the transaction rolls back, recovery resumes the item). A queued
 * item holds none.
 */
export async function releaseItemLock(tx: Tx, item: WorkItemRow): Promise<void> {
  const held = heldLockOf(item);
  if (held) await releaseHeldLock(tx.sql, held);
}

/**
 * `releaseItemLock`, then `endThread` of the item's thread: the release first, as before every end (LOCK
 * ORDER 3 of engine/tx.ts: the row goes before the thread and its orchestration are locked), on Postgres in
 * the end's round trip (db/thread-close.ts `endChildLockingParent`); in a Postgres closure of answers, both
 * left for the closure's one end statement after its last step (ends-together.ts), the rows still first.
 */
export function releaseItemLockEndingThread(tx: Tx, item: WorkItemRow, thread: ThreadRow, to: EndedStatus): Promise<void> {
  // A Postgres closure of answers ends its items' threads together after its last step (ends-together.ts).
  if (endThreadLater(tx, thread, to, heldLockOf(item))) return Promise.resolve();
  return endThread(tx, thread, to, heldLockOf(item));
}

/** The scope lock row a leased item holds (a queued item holds none). */
function heldLockOf(item: WorkItemRow): HeldLock | undefined {
  if (item.status !== 'claimed' && item.status !== 'running') return undefined;
  return { scope: item.lock_scope, owner: item.id, lost: `work item ${item.id} no longer holds its lock ${item.lock_scope}` };
}

/**
 * Reads the item, with its thread and what the step also needs (`ahead`) in the same statement, and
 * checks we still hold its lease in the expected status. On Postgres the item's row is locked first,
 * before any other row the step changes (its charge, the chain head): the LOCK ORDER of engine/tx.ts.
 * `known`: the row read earlier in this transaction by `ItemReads` with the same `ahead` (no read then;
 * on Postgres `ItemReads` locked it).
 */
export async function leasedItemAndThread(
  tx: Tx,
  ctx: EngineContext,
  id: string,
  status: 'claimed' | 'running',
  known?: ItemWithThread,
  ahead: ReadAhead = 'rows',
): Promise<ItemWithThread> {
  // An async function, not `.then` on the read: with the rows `known` (a shared closure's, read ahead) it
  // makes one promise, and no closure per call.
  const read = known ?? (await lockWorkItemWithThread(tx.sql, id, ahead));
  if (!read || read.item.status !== status || read.item.lease_owner !== ctx.owner)
    throw new StaleStateError(`work item ${id} is not ${status} under ${ctx.owner}`);
  return read;
}

/**
 * The rows of a shared write closure's items (shared-writes.ts), read in one statement before its
 * steps run, each taken once by its item's step. The read is as good as the step's own would be:
 * - it is this transaction's, and the closure's earlier steps change only their own item's row;
 * - a thread may have moved since by an earlier step only as that step's thread's parent (started or
 *   closed with its child). Every thread move is one UPDATE guarded by the status read, so a stale
 *   status fails the closure (StaleStateError) and each item's step runs again alone, reading its rows.
 * Taken once: a second step of the same item in the closure (none today) would read its row itself.
 * On Postgres the read locks the items, in id order, and the closure then takes, before any step runs,
 * what its steps share (`locks`): the budget locks of their budgeted projects, in sorted order (starts
 * and records), or the heads of their target documents, in id order (answers, whose apply locks its
 * target's head; they take no budget lock); the steps run by parent, then thread id (`threadKey`): the
 * LOCK ORDER of engine/tx.ts across the closure.
 */
export class ItemReads {
  private constructor(private readonly reads: Map<string, ItemWithThread>) {}

  /**
   * `ahead`: what the step also needs (item-with-thread.ts `ReadAhead`), as good as its own read would
   * be for the same reason: an earlier step of the closure appends only its own item's entries and
   * changes only its own item's charge.
   */
  static async read(tx: Tx, ids: readonly string[], ahead: ReadAhead, locks: 'budgets' | 'documents'): Promise<ItemReads> {
    const reads = new ItemReads(await lockWorkItemsWithThreads(tx.sql, ids, ahead));
    if (tx.sql.dialect !== 'postgres') return reads;
    if (locks === 'documents') {
      await lockTargetDocuments(tx, reads.reads.values());
      return reads;
    }
    const projects = new Set([...reads.reads.values()].map((r) => r.item.project_id));
    for (const projectId of [...projects].sort()) await lockProjectBudget(tx, projectId);
    return reads;
  }

  /**
   * The order of the closure's steps: by parent, then by thread id. A start of several items no longer
   * depends on it: it takes their threads, then their orchestrations, each in id order, in one statement
   * (starts.ts `startThreads`); a record takes no thread. Its steps' entries and events come grouped by
   * orchestration.
   */
  threadKey(id: string): string {
    const thread = this.reads.get(id)?.thread;
    return thread ? `${thread.parent_thread_id ?? ''}\0${thread.id}` : '';
  }

  /** The item's row as read ahead, once; undefined after (or when it was not found). */
  take(id: string): ItemWithThread | undefined {
    const read = this.reads.get(id);
    this.reads.delete(id);
    return read;
  }
}

/**
 * Postgres: the heads of the documents a closure's answers apply to, locked in id order, before the
 * first apply (db/projects.ts `lockDocumentHeads`). When two answers are of one project, the transaction
 * plans from what its earlier applies queued (db/document-parts-queued.ts `writeDocumentsAgain`): an apply then
 * reads the version, the parts' places and the cached value an earlier one wrote — of its target, which it writes next, or
 * of another document of the project, which it may read (an operation reads its project's documents).
 */
async function lockTargetDocuments(tx: Tx, reads: Iterable<ItemWithThread>): Promise<void> {
  const targets = [...reads].map(({ thread }) => documentTargetOf(thread));
  if (new Set(targets.map((t) => t.project_id)).size < targets.length) writeDocumentsAgain(tx.sql);
  if (targets.length > 0) await lockDocumentHeads(tx.sql, targets);
}

export function threadOf(tx: Tx, item: WorkItemRow): Promise<ThreadRow> {
  return getThread(tx.sql, item.thread_id).then((thread) => {
    if (!thread) throw new Error(`work item ${item.id} has no thread ${item.thread_id}`);
    return thread;
  });
}
