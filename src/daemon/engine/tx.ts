/**
 * Helpers for code that runs inside one writer transaction: move a thread, close a finished orchestration
 * (a ledger entry's append: ledger-append.ts). Each emits the matching event, published only if the transaction commits. A
 * thread that ends is reported through the `threadsEnded` hook, which the composition root wires to the
 * scheduler (a scheduled run ends with its thread, in the same transaction).
 */
import type { Tx as WriteScope, WriteTx } from '../../core/tx.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { cancelActiveThreads, countChildThreadsByStatus, getThread, transitionThread, transitionThreadIfStill } from '../../db/threads.js';
import { releaseHeldLock, releaseLocksOwnedBy, type HeldLock } from '../../db/locks.js';
import { endChildLockingParent, lockThreadForClose, type LockedForClose } from '../../db/thread-close.js';
import type { TargetRef } from '../../domain/operations.js';
import { isTerminalThread, type ThreadStatus } from '../../domain/states.js';
import type { EngineEvent } from './events.js';
import { traceIdOf } from '../../core/trace-context.js';

export type EndedStatus = 'complete' | 'failed' | 'canceled';

/**
 * What the engine tells the rest of the daemon from inside a transaction. The composition root wires
 * them (app.ts); they run in the same transaction as the change they report.
 */
export interface EngineHooks {
  /** Threads reached a terminal status (one, or several: a bulk cancel's, a closure of answers' completed children): the scheduler finalizes the runs they work for. */
  threadsEnded(tx: Tx, threads: readonly ThreadRow[], status: EndedStatus): Promise<void>;
  /**
   * Whether the project has a budget (config `budgets`): only a budgeted project's items can be parked
   * for spend, so only its spend decisions take the cross-daemon budget lock (engine/charges.ts).
   */
  budgeted(projectId: string): boolean;
}

/** A write closure's transaction (core/tx.ts) with the engine's events and hooks. */
export type Tx = WriteScope<EngineEvent, EngineHooks>;
export type Write = WriteTx<EngineEvent, EngineHooks>;

export function emitWorkItem(tx: Tx, thread: ThreadRow, item: WorkItemRow): void {
  tx.emit({
    type: 'work_item',
    thread_id: thread.id,
    parent_thread_id: thread.parent_thread_id,
    trace_id: traceIdOf(thread.traceparent),
    work_item_id: item.id,
    status: item.status,
    attempt: item.attempt,
    error_code: item.error_code,
    not_before: item.status === 'queued' ? item.not_before : null,
  });
}

/**
 * Moves the thread to `to` (guarded by its current status). When that ends the thread, it calls the
 * `threadsEnded` hook and closes the parent if this was its last running child. Returns the updated row.
 */
export async function moveThread(tx: Tx, thread: ThreadRow, to: ThreadStatus): Promise<ThreadRow> {
  await transitionThread(tx.sql, thread, thread.status as ThreadStatus, to, tx.now);
  return await afterMove(tx, thread, to);
}

/**
 * `moveThread` if the thread is still in `thread.status` (true); false, and nothing done, if it is not.
 * A child's end locks its parent for the close check in the same round trip (db/thread-close.ts
 * `endChildLockingParent`): the same two rows in the same order, the hook's statements after them
 * (they lock neither: a run's finalize runs in the COMMIT's query). `release`: a lock row deleted first
 * (endThread), in that round trip too.
 */
async function moveThreadIfStill(tx: Tx, thread: ThreadRow, to: EndedStatus, release?: HeldLock): Promise<boolean> {
  const from = thread.status as ThreadStatus;
  const parentId = thread.parent_thread_id;
  if (parentId === null) {
    if (release) await releaseHeldLock(tx.sql, release);
    if (!(await transitionThreadIfStill(tx.sql, thread, from, to, tx.now))) return false;
    await afterMove(tx, thread, to);
    return true;
  }
  const ended = await endChildLockingParent(tx.sql, { id: thread.id, parent_thread_id: parentId }, from, to, tx.now, release);
  if (!ended.moved) return false;
  await afterMove(tx, thread, to, ended);
  return true;
}

/**
 * What follows a thread's move: its event, and for an end the hook and the parent's close (`parent`:
 * the parent already locked for it, in the move's round trip).
 */
async function afterMove(tx: Tx, thread: ThreadRow, to: ThreadStatus, parent?: { parent: LockedForClose | undefined }): Promise<ThreadRow> {
  const updated: ThreadRow = { ...thread, status: to, closed_at: isTerminalThread(to) ? tx.now : null };
  emitThread(tx, updated);
  if (isTerminalThread(to)) {
    await tx.hooks.threadsEnded(tx, [updated], to as EndedStatus);
    if (thread.parent_thread_id) await closeParentIfDone(tx, thread.parent_thread_id, parent);
  }
  return updated;
}

/**
 * Cancels those of these threads still open or running, in one statement (a bulk cancel), then does for
 * them what `moveThread` does for one: events, the `threadsEnded` hook, closing each parent whose last
 * child this was.
 */
export async function cancelThreads(tx: Tx, ids: readonly string[]): Promise<void> {
  await closeParentsOf(tx, await cancelActiveThreadsAndReport(tx, ids));
}

/**
 * Ends these threads, each by one guarded UPDATE from the status it was read in, then does for them what
 * `moveThread` does for one — events, the `threadsEnded` hook — and closes each parent once, after all
 * of its children moved: the children's rows before their parent's (see LOCK ORDER), where a
 * `moveThread` per child locked the parent after the first child and before the next.
 */
export async function endThreads(tx: Tx, threads: readonly ThreadRow[], to: EndedStatus): Promise<void> {
  if (threads.length === 0) return;
  for (const t of threads) await transitionThread(tx.sql, t, t.status as ThreadStatus, to, tx.now);
  const ended = threads.map((t): ThreadRow => ({ ...t, status: to, closed_at: tx.now }));
  await reportEnded(tx, ended, to);
  await closeParentsOf(tx, ended);
}

/**
 * Cancels an orchestration and its active children: the children first, then the orchestration (one
 * guarded UPDATE from the status `parent` was read in; StaleStateError, and the write runs again, if a
 * child's end or start moved it meanwhile). Children before their parent is the lock order of every
 * transaction that changes both (see LOCK ORDER above `closeParentIfDone`); locking the parent first
 * deadlocked with a child ending at that moment.
 */
export async function cancelOrchestration(tx: Tx, parent: ThreadRow, childIds: readonly string[]): Promise<void> {
  await cancelActiveThreadsAndReport(tx, childIds);
  // Not closeParentIfDone: it would end the orchestration `failed` (its children did not complete).
  await moveThread(tx, parent, 'canceled');
}

/** `cancelActiveThreads`, then the events and the `threadsEnded` hook of the threads it canceled. */
async function cancelActiveThreadsAndReport(tx: Tx, ids: readonly string[]): Promise<ThreadRow[]> {
  const canceled = await cancelActiveThreads(tx.sql, ids, tx.now);
  await reportEnded(tx, canceled, 'canceled');
  return canceled;
}

/** What `moveThread` does for one ended thread, for several: their events, then the `threadsEnded` hook. */
async function reportEnded(tx: Tx, ended: readonly ThreadRow[], to: EndedStatus): Promise<void> {
  if (ended.length === 0) return;
  for (const t of ended) emitThread(tx, t);
  await tx.hooks.threadsEnded(tx, ended, to);
}

/** Closes each parent of these ended threads once, after all of them moved (see LOCK ORDER). */
async function closeParentsOf(tx: Tx, ended: readonly ThreadRow[]): Promise<void> {
  for (const parentId of new Set(ended.map((t) => t.parent_thread_id))) if (parentId) await closeParentIfDone(tx, parentId);
}

export function emitThread(tx: Tx, thread: ThreadRow): void {
  tx.emit({
    type: 'thread',
    thread_id: thread.id,
    parent_thread_id: thread.parent_thread_id,
    trace_id: traceIdOf(thread.traceparent),
    status: thread.status,
    kind: thread.kind,
    target_ref: JSON.parse(thread.target_ref) as TargetRef,
  });
}

/**
 * Ends a thread because its work item ended; a thread already ended (e.g. canceled) is left as is.
 * `thread` is the row this transaction read: it is moved from that status by one guarded UPDATE,
 * without reading it again. Only when the UPDATE finds it changed (on Postgres another transaction,
 * e.g. a cancel, committed since) is it read again: ended, it is left as is; else it moves from there.
 * `release`: the item's scope lock row, deleted first (before the thread and its orchestration: LOCK
 * ORDER 3) — in the end's round trip when there is one (`moveThreadIfStill`); StaleStateError if it is gone.
 */
export async function endThread(tx: Tx, thread: ThreadRow, to: EndedStatus, release?: HeldLock): Promise<void> {
  if (isTerminalThread(thread.status)) {
    if (release) await releaseHeldLock(tx.sql, release);
    return;
  }
  if (await moveThreadIfStill(tx, thread, to, release)) return;
  const current = await getThread(tx.sql, thread.id);
  if (!current || isTerminalThread(current.status)) return;
  await moveThread(tx, current, to);
}

/**
 * LOCK ORDER (Postgres; SQLite's one writer runs every write alone). Every write takes the rows it
 * changes in this order, so no two writes wait for each other in a cycle (Postgres would abort one after
 * `deadlock_timeout`, and the writer run it again: a stall of ~1 s):
 *   1. work items. A step of a leased item locks its item with its first read (`leasedItemAndThread`),
 *      before anything else of it; claims and the recovery scan take items with SKIP LOCKED (never
 *      waiting: a claim round may take them after its budget lock), so the item's lock serializes
 *      everything done to it. A cancel locks its children's queued items first. The heartbeat extends
 *      all its items' leases in id order, then their scope rows (`extendLeases`). A shared closure
 *      (shared-writes.ts) locks all its items in id order; then one of starts or records its projects'
 *      budget locks in sorted order, one of answers its target documents' heads in id order (3; an
 *      answer takes no budget lock); then it runs the steps by parent, then thread id (leased.ts `threadKey`)
 *      (a start gives back the reservations of the items it does not send before it moves their threads:
 *      engine/starts.ts). A step alone takes its budget lock before its threads too.
 *   2. advisory locks: a budgeted project's `budget:<project>` (engine/charges.ts: several in sorted
 *      order, or a claim round waiting only for its first), a closure of answers' `document:<target>`
 *      keys (in key order, and no budget lock: see 3) and a lock scope's `lock:<scope>`, which
 *      claims (in the claim's own statement, after the item's row: db/claim-with-scope.ts), the recovery
 *      scan and the heartbeat only try (db/locks.ts `acquireLockUnlessBusy`, and
 *      `extendLock` of an expired row): a scope another transaction is taking is passed over, never
 *      waited for — two claim rounds took two scopes in crossing order. A claim round's read of an item
 *      it may claim only tries `claim:<item>` too (db/item-with-thread.ts `readClaimCandidate`, or the
 *      first part of its claim's statement: db/claim-with-scope.ts `claimCandidateWithScope`): it
 *      waits for nothing, so it may come anywhere in the order (before the round's budget lock).
 *   3. a document's head (the answer's apply; a shared closure of answers takes all of them first, in id
 *      order: no write holds one head and waits for another otherwise), then the item's charge: only under
 *      the item's lock (its scope lock row too, which a finish or a failure deletes before its threads, 4: in
 *      the child's end's round trip, first, `endThread`'s `release`, migrations/pg/0019; a Postgres closure of
 *      answers deletes all of its rows in its end statement after its last step, then its threads, 0020).
 *      A write that holds a head takes no item and no advisory lock after it (a closure
 *      of answers took all of them before its heads). A project's import updates its architecture's head
 *      at COMMIT, holding only its project row, which no answer takes. Before its heads, a closure of
 *      answers takes its targets' keys (advisory locks of 2, in key order: db/projects.ts
 *      `lockDocumentHeads`), so a document it creates is held too: no other closure then holds any of
 *      its heads, and an answer applied alone takes one head and nothing after it.
 *   4. the child's thread, then its orchestration's thread (a child's end: in one round trip, db/thread-close.ts
 *      `endChildLockingParent`), then the orchestration's lock rows. Several
 *      children: every child before any orchestration, the children in id order, then the
 *      orchestrations in id order — a cancel's `cancelActiveThreads`; a start's `startThreads`
 *      (engine/starts.ts: one statement for one item's start or a shared closure's several, before any
 *      of its failures ends a thread or closes an orchestration); an orchestration adopting runs in
 *      progress (db/threads.ts `adoptThreads`). A start locks an orchestration it starts only while it
 *      is open (with its first child), and that of a child it fails whatever its status. A shared
 *      closure of answers on Postgres ends its children after its last step, together, in one statement
 *      (engine/ends-together.ts, migrations/pg/0020; each step's end is left for it, and no step moves
 *      another thread): every child's lock row first (3), then every child in id order, then their
 *      orchestrations in id order, stopping at the first failed guard; its children are its own running
 *      items', which no start or adoption takes, and a cancel takes one orchestration's children in the
 *      same id order, then it.
 *   5. at the end, in the COMMIT's query: first the statements the steps queued for the end, in the order
 *      queued — document parts and the document's next version (its head row already locked in 3; also in
 *      a closure of answers that writes a document again: db/document-parts-queued.ts
 *      `writeDocumentsAgain`), a claim's new reservations, an answer's item marked applied (its own row,
 *      whose lock, 1, the step holds) with its new mutation row, in one statement — then the ledger's chain
 *      head, then the answer's charge settle (the
 *      item's own charge: item 1 already serializes it) and the projects' spend rows in sorted (project,
 *      day) order (always after the append, whatever a daemon's `budgets` say: `moveSpend`; sorted for
 *      the transactions without an append). On Postgres a transaction's first settle is one statement with
 *      its first spend row (db/charges.ts `settleChargeFromResponse`): the charge row needs no order of its
 *      own, being the item's (1).
 * Not strictly in the order: a route's shared rate-limit row (several daemons with a configured bucket:
 * engine/shared-rate-limits.ts `admit`, db/rate-limits.ts). A claim round takes it at each claim's
 * admission: after that claim's budget lock (2), and on Postgres for a project without a budget after the
 * claim's item row and scope row (1, 2: engine/producer.ts `claimThenAdmit`); its later claims then take
 * items (SKIP LOCKED), scopes (only tried) and budget locks after it. A park or unpark takes it alone, in a
 * transaction of its own, and so does a committed claim's give-back when its start makes no call
 * (engine/claim-admissions.ts `giveBackShared`: after the start's write, never in it). So the only waits
 * while holding it are a later claim's first budget lock: a round holding the bucket and waiting for
 * `budget:<p>` while another round holds `budget:<p>` and waits for the bucket is a cycle (rare; as for any
 * claim of a round after its first), which Postgres breaks after `deadlock_timeout` and the writer runs the
 * aborted round again.
 * A schedule run's start that joins a thread already running (scheduler/start-run.ts) takes the thread's
 * row FOR SHARE (4: a move of it waits, as it waits for any thread lock), then links the run's row; an
 * end takes the thread, then the run's row in its COMMIT's query (5): the same order.
 * Not in the order: the queue depth's shard row (pg migration 0017), which a transaction moving items in or
 * out of `queued` updates wherever it does: each session has its own (past 64 sessions too: the slots go
 * on), so no transaction waits for it.
 * The engine's paths are built that way and are the hot ones — a start locks its items, then moves its
 * children and their open parents in one UPDATE (the items' own UPDATE at its COMMIT); an answer or a
 * failure ends the item, then the child, then closes the parent here — so the rare paths follow them: a cancel ends the children's queued items, then the
 * children, then their orchestration (`cancelOrchestration`); a retry or a replay reopens the child
 * before its parent. The other order, parent first, would hold the orchestration's row for a child's
 * whole transaction, so a generate-all's children would end one at a time. Not obvious: a guarded
 * UPDATE that waited for a row another transaction changed keeps that row locked even when the row no
 * longer matches (Postgres locks it to re-check it), so the cancel's `status = 'queued'` holds an item a
 * claim committed meanwhile, and the start of that item must lock the item before its thread. A thread's
 * move is guarded by the parent it was read with too (db/threads.ts `transitionThreadIfStill`): an
 * adoption committed meanwhile gives it the parent whose close its end must check.
 *
 * Closes an orchestration once every child has ended: `complete` if all completed, else `failed`
 * (continue_on_error: one failed child does not stop the others). Releases the locks it holds.
 */
export async function closeParentIfDone(tx: Tx, parentId: string, known?: { parent: LockedForClose | undefined }): Promise<void> {
  // Locked before the children are counted: of two last children ending at once, the second counts
  // after the first committed, so one of them always sees every child ended. `known`: locked already,
  // right after the child's end (`moveThreadIfStill`).
  const locked = known ? known.parent : await lockThreadForClose(tx.sql, parentId);
  if (!locked || isTerminalThread(locked.thread.status) || locked.activeChild) return;
  const parent = locked.thread;
  // Every child has ended (open and running are the only other statuses): how they ended decides.
  const counts = await countChildThreadsByStatus(tx.sql, parentId);
  if (counts.length === 0) return;
  const allComplete = counts.every((c) => c.status === 'complete');
  await moveThread(tx, parent, allComplete ? 'complete' : 'failed');
  await releaseLocksOwnedBy(tx.sql, parent.id);
}
