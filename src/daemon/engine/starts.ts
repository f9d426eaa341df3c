/**
 * The start of leased items (claimed → running, with the `prompt` entry committed before any call is
 * made), for one item or a shared closure's several (shared-writes.ts) in one transaction. In three
 * passes, so that the rows the closure changes are taken in the LOCK ORDER of engine/tx.ts whatever
 * each item's outcome:
 *   1. each item, by itself: what it does — send a request, finish from an answer already recorded, or
 *      fail (`planStart`); its budget reservation is given back here when no call follows (the budget
 *      lock comes before any thread's);
 *   2. every thread the closure changes, in one statement (`startThreads`): the items' threads
 *      started, and those of the items it fails locked, in id order, then their orchestrations;
 *   3. each item's outcome: the failures (tx.ts's thread ends and orchestration closes find their rows
 *      locked already), the prompt entries, the answers from the ledger; the items sent or answered move
 *      to running in one statement (on Postgres in the COMMIT's query).
 * Moving each item's threads as its own start came (one UPDATE per item) held a first child's
 * orchestration before a later child's thread, and a failure closed an orchestration before one: a cancel
 * of that later child by its own id (the child, then the orchestration) deadlocked with it.
 */
import type { ItemWithThread } from '../../db/item-with-thread.js';
import { getLastLedgerEntryForWorkItem } from '../../ledger/store.js';
import type { LedgerRow, ThreadRow, WorkItemRow } from '../../db/schema.js';
import { markWorkItemsRunning } from '../../db/work-item-moves.js';
import { startThreadsInLockOrder } from '../../db/threads.js';
import { StaleStateError } from '../../core/errors.js';
import type { ChatRequest } from '../../domain/prompts.js';
import type { ClassifiedError } from '../../domain/errors.js';
import { releaseUnsent } from './charges.js';
import { failAttempt } from './failures.js';
import { leasedItemAndThread, type EngineContext, type ItemReads } from './leased.js';
import { buildItemRequest, type BuiltRequest } from './request.js';
import { appendCachedResponse, cacheKeyOf, findCachedAnswer } from './response-cache.js';
import { emitThread, emitWorkItem, type Tx } from './tx.js';
import { appendEntry, type PendingEntry } from './ledger-append.js';
import type { ModelRoute } from '../routing/router.js';

/** What a started item does next: send this request along its route, or finish from an answer already recorded. */
export type StartResult =
  /** `requestHash`: the request's cache key (null: not cacheable), taken before the call so nothing done to the request on the way can change it. */
  { kind: 'call'; request: ChatRequest; route: ModelRoute; prompt: PendingEntry; requestHash: string | null } | { kind: 'recorded'; response: PendingEntry };

/** One item's start to do. `claimed`: the request its claim built (see `planStart`), or null. */
export interface StartAsk {
  itemId: string;
  claimed: BuiltRequest | null;
}

/** What `planStart` decided for an item, before any thread moves. */
type StartPlan = { item: WorkItemRow; thread: ThreadRow } & (
  | { kind: 'fail'; error: ClassifiedError }
  /** A replay queued the item with its answer: nothing is sent. */
  | { kind: 'replayed'; response: LedgerRow }
  /** `cached`: the cache's answer to this exact request (nothing is sent), or null (the call is sent). */
  | { kind: 'send'; built: BuiltRequest; route: ModelRoute; requestHash: string | null; cached: LedgerRow | null }
);

/**
 * Starts the items, in this order, in this transaction. Each result is the item's: normally its prompt
 * recorded and the exact request to send; a recorded answer instead when one exists (the item's last
 * entry is already a `response`: a replay queued it with the answer; or the cache holds a valid answer to
 * this exact request); null when the item ended instead (its thread was canceled, or its request cannot
 * be built: its target no longer exists). `reads`: a shared closure's rows, read ahead (leased.ts `ItemReads`).
 */
export async function startWorkItems(tx: Tx, ctx: EngineContext, asks: readonly StartAsk[], reads?: ItemReads): Promise<(StartResult | null)[]> {
  const plans: StartPlan[] = [];
  for (const ask of asks) plans.push(await planStart(tx, ctx, ask, reads?.take(ask.itemId)));
  const sent = plans.filter((p) => p.kind !== 'fail');
  await startThreads(
    tx,
    sent.map((p) => p.thread),
    plans.filter((p) => p.kind === 'fail').map((p) => p.thread),
  );
  if (sent.length > 0)
    await markWorkItemsRunning(
      tx.sql,
      sent.map((p) => p.item.id),
      ctx.owner,
    );
  const results: (StartResult | null)[] = [];
  for (const plan of plans) results.push(await outcomeOf(tx, ctx, plan));
  return results;
}

/**
 * What the item's start does, from its row read under its lease (StaleStateError when it is not claimed
 * by this daemon any more). `claimed`: the request the claim built for its estimate (producer.ts),
 * recorded and sent as it is — the item's state the claim read it from is this lease's (its thread,
 * repairs and escalation cannot change while it is leased), and the call then bills at most what the
 * claim reserved. Without it, or when the target project is gone since, the request is built here (and
 * a project gone fails the item unsent). No call follows: the claim's reservation goes back to the budget.
 */
async function planStart(tx: Tx, ctx: EngineContext, ask: StartAsk, known: ItemWithThread | undefined): Promise<StartPlan> {
  const read = await leasedItemAndThread(tx, ctx, ask.itemId, 'claimed', known, 'start');
  const { item, thread } = read;
  if (thread.status === 'canceled') {
    await releaseUnsent(tx, item);
    return { item, thread, kind: 'fail', error: { code: 'CANCELED', class: 'canceled', message: 'canceled before the call started' } };
  }
  // Read with the item (its last entry's type): only a `response` needs its row.
  const pending = read.lastEntryType === undefined || read.lastEntryType === 'response' ? await getLastLedgerEntryForWorkItem(tx.sql, item.id) : null;
  if (pending?.entry_type === 'response') {
    await releaseUnsent(tx, item);
    return { item, thread, kind: 'replayed', response: pending };
  }
  const built = ask.claimed && read.project ? ask.claimed : await buildItemRequest(tx.sql, ctx.operations, read);
  if (!built.ok) {
    await releaseUnsent(tx, item);
    return { item, thread, kind: 'fail', error: built.error };
  }
  const route = ctx.routeOf(built.model);
  // Once per start: the cache look-up's key is also the one the answer is indexed under (`SentPrompt`).
  const requestHash = cacheKeyOf(route.endpoint.label, built.request);
  const cached = ctx.cache && requestHash !== null ? ((await findCachedAnswer(tx.sql, requestHash)) ?? null) : null;
  if (cached) await releaseUnsent(tx, item);
  return { item, thread, kind: 'send', built, route, requestHash, cached };
}

/** The item's outcome, once its threads moved (`startThreads`): its failure, or its entries and event. */
async function outcomeOf(tx: Tx, ctx: EngineContext, plan: StartPlan): Promise<StartResult | null> {
  const { item, thread } = plan;
  if (plan.kind === 'fail') {
    await failAttempt(tx, ctx, item, plan.error);
    return null;
  }
  if (plan.kind === 'replayed') {
    emitRunning(tx, thread, item);
    return { kind: 'recorded', response: { row: plan.response } };
  }
  const { built, route, requestHash, cached } = plan;
  const prompt = appendEntry(tx, thread, item.id, 'prompt', item.attempt, {
    request: built.request,
    attempt: item.attempt,
    repair: item.repair_count,
    // Which logical model, which real one (also the request's `model`) and where: the router's choice.
    logical_model: route.logical,
    model: route.model,
    endpoint: route.endpoint.label,
    ...(built.escalated ? { escalation: true } : {}),
  });
  emitRunning(tx, thread, item);
  if (cached) return { kind: 'recorded', response: appendCachedResponse(tx, thread, item, cached) };
  return { kind: 'call', request: built.request, route, prompt, requestHash };
}

/** The threads' orchestrations' ids, each once (a module function: docs/design-notes.md "Closures made per call"). */
function parentIdsOf(threads: readonly ThreadRow[]): string[] {
  const ids = new Set<string>();
  for (const t of threads) if (t.parent_thread_id) ids.add(t.parent_thread_id);
  return [...ids];
}

/**
 * open → running for the threads of the items a start sends (`started`, as read: those already running
 * stay), each orchestration with its first child (while it is still open: of two children starting at
 * once, the second finds it running and changes nothing). One statement, which first locks every thread
 * row the start's transaction changes, in the LOCK ORDER of tx.ts (above `closeParentIfDone`): the
 * children, with `ending` (threads of the items it fails, which it may end), in id order, then their
 * orchestrations in id order. Guarded: a
 * thread read open that did not move, or that an orchestration adopted since it was read, is a
 * StaleStateError. Emits each moved child's event, then its orchestration's. Nothing to move and at most
 * one thread to end: no statement (a failure alone takes its thread, then its parent, in that order).
 */
export async function startThreads(tx: Tx, started: readonly ThreadRow[], ending: readonly ThreadRow[]): Promise<void> {
  const opening = started.filter((t) => t.status === 'open');
  const children = [...new Set([...opening, ...ending].map((t) => t.id))];
  if (opening.length === 0 && children.length <= 1) return;
  const moved = await startThreadsInLockOrder(tx.sql, {
    children,
    start: opening.map((t) => t.id),
    startParents: parentIdsOf(opening),
    closeParents: parentIdsOf(ending),
  });
  const byId = new Map<string, ThreadRow>();
  for (const row of moved) byId.set(row.id, row);
  for (const t of opening) {
    const row = byId.get(t.id);
    if (!row || row.parent_thread_id !== t.parent_thread_id) throw new StaleStateError(`thread ${t.id} is not open under the parent it was read with`);
    emitThread(tx, row);
    const parent = t.parent_thread_id ? byId.get(t.parent_thread_id) : undefined;
    if (parent) {
      emitThread(tx, parent);
      byId.delete(parent.id); // its event once, after its first child's
    }
  }
}

/** The event of an item `markWorkItemsRunning` moves, emitted after its thread's: a follower sees the thread start, then the item run. */
function emitRunning(tx: Tx, thread: ThreadRow, item: WorkItemRow): void {
  emitWorkItem(tx, thread, { ...item, status: 'running' });
}
