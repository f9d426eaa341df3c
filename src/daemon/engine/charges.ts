/**
 * The life of a call's charge, inside the engine's transactions (lease-then-pay, ADR-0023):
 *
 *   reserveCharge              in the claim's transaction, before any call: the estimated maximum
 *   settleChargeFromResponse   in the transaction that records the `response` entry: the real usage
 *   closeChargeAfterError      the call failed: released if the provider certainly did not bill it,
 *                              otherwise in doubt (counted at its maximum)
 *   releaseUnsentCharge        the item ended or went back to the queue before any call was made
 *
 * Usage is copied from the response entry in the same transaction that appends it, and the charge
 * row is guarded by `status = 'reserved'` and a unique `response_seq`: a paid call is counted exactly
 * once, however often the item is retried or the daemon restarted.
 */
import { addProjectSpendAtCommit, closeChargeWithoutResponse, getOpenCharge, insertCharge, settleChargeFromResponse } from '../../db/charges.js';
import type { ChargeRow, WorkItemRow } from '../../db/schema.js';
import { unparkBudgetItems } from '../../db/work-item-claims.js';
import { lockKeyForTransaction, tryLockKeyForTransaction } from '../../db/key-locks.js';
import { DONE } from '../../db/statements.js';
import { costUsd, utcDay, type CallEstimate, type ModelPrice } from '../../domain/budget.js';
import type { Usage } from '../../domain/completion.js';
import type { ClassifiedError } from '../../domain/errors.js';
import type { Tx } from './tx.js';
import { atEndAfterAppend } from './ledger-append.js';
import { newId } from '../../core/ids.js';

export type PriceOf = (model: string) => ModelPrice | undefined;

export async function reserveCharge(tx: Tx, item: WorkItemRow, model: string, estimate: CallEstimate): Promise<void> {
  const day = utcDay(tx.now);
  await moveSpend(tx, { project_id: item.project_id, day, tokens: estimate.tokens, cost_usd: estimate.cost_usd });
  await insertCharge(tx.sql, {
    id: newId(tx.now),
    work_item_id: item.id,
    thread_id: item.thread_id,
    project_id: item.project_id,
    model,
    attempt: item.attempt,
    repair: item.repair_count,
    status: 'reserved',
    day,
    reserved_tokens: estimate.tokens,
    reserved_cost_usd: estimate.cost_usd,
    prompt_tokens: null,
    completion_tokens: null,
    total_tokens: null,
    cost_usd: null,
    response_seq: null,
    created_at: tx.now,
    settled_at: null,
  });
}

/**
 * The item's response was recorded (its `response` entry, queued by this transaction for its end):
 * settle at its usage. A response without usage was paid for an unknown amount, so it stays counted at
 * its maximum (in doubt). The charge row's one guarded change names the entry's seq, so it runs at the
 * transaction's end, after the append (on Postgres in its COMMIT's query, where it may ride with a spend
 * row: `settleAtEnd`); the spend's move is noted now and written at the end too (`moveSpend`).
 * `call`: the telemetry written with it. `openCharge`: the item's open reservation as read with the item
 * (null: none), undefined to read it here.
 */
export async function settleFromResponse(
  tx: Tx,
  item: WorkItemRow,
  usage: Usage | null,
  call: AnsweredCall,
  priceOf: PriceOf,
  openCharge: ChargeRow | null | undefined,
): Promise<void> {
  await lockProjectBudget(tx, item.project_id);
  // Read with the item, before the budget lock: the reservation is this lease's own row (no other writer
  // moves it while the lease holds), and its settle below is guarded by `status = 'reserved'`.
  const charge = openCharge === undefined ? await getOpenCharge(tx.sql, item.id) : openCharge;
  if (!charge) return; // leased before charges existed (an upgrade mid-flight): nothing reserved to settle
  // No price for the model: the cost is unknown (NULL, shown as "unpriced"), not zero.
  const price = priceOf(charge.model);
  const cost = usage && price ? costUsd(price, usage.prompt_tokens, usage.completion_tokens) : null;
  atEndAfterAppend(tx, () =>
    settleAtEnd(tx, {
      id: charge.id,
      work_item_id: item.id,
      status: usage ? 'settled' : 'in_doubt',
      prompt_tokens: usage?.prompt_tokens ?? null,
      completion_tokens: usage?.completion_tokens ?? null,
      total_tokens: usage?.total_tokens ?? null,
      cost_usd: cost,
      http_status: call.httpStatus,
      latency_ms: call.latencyMs,
      provider_request_id: call.requestId,
      now: tx.now,
    }),
  );
  if (!usage) return; // in doubt: stays counted at its maximum
  // Budgets now count the real usage instead of the maximum (a call can exceed its estimate slightly).
  await moveSpend(tx, {
    project_id: charge.project_id,
    day: charge.day,
    tokens: usage.total_tokens - charge.reserved_tokens,
    cost_usd: (cost ?? 0) - charge.reserved_cost_usd,
  });
  if (usage.total_tokens < charge.reserved_tokens) await freeHeadroom(tx, item);
}

/** The telemetry of a call answered with a recorded response, written on its charge by the settle. */
export interface AnsweredCall {
  httpStatus: number;
  latencyMs: number;
  requestId: string | null;
}

/**
 * The call failed without a recorded response. An HTTP error answer (4xx/5xx, 429 included) is not
 * billed, nor is a request that never left; anything else (timeout, dropped connection, abort,
 * INTERRUPTED by a crash) may have been, so it counts as spent. `latencyMs`: how long the call took,
 * when this process made it (null for a call in flight at a crash).
 */
export async function closeAfterError(tx: Tx, item: WorkItemRow, error: ClassifiedError, latencyMs: number | null): Promise<void> {
  await lockProjectBudget(tx, item.project_id);
  const charge = await getOpenCharge(tx.sql, item.id);
  if (!charge) return;
  const billed = error.httpStatus === undefined && !error.notSent;
  const call = latencyMs === null ? null : { outcome: error.code, http_status: error.httpStatus ?? null, latency_ms: latencyMs };
  await closeChargeWithoutResponse(tx.sql, { id: charge.id, status: billed ? 'in_doubt' : 'released', now: tx.now, call });
  if (!billed) await unreserve(tx, item, charge);
}

/** No call was made for this lease (canceled, target gone, lease expired before the prompt). */
export async function releaseUnsent(tx: Tx, item: WorkItemRow): Promise<void> {
  await lockProjectBudget(tx, item.project_id);
  const charge = await getOpenCharge(tx.sql, item.id);
  if (!charge) return;
  await closeChargeWithoutResponse(tx.sql, { id: charge.id, status: 'released', now: tx.now, call: null });
  await unreserve(tx, item, charge);
}

/** A released charge gives its whole reservation back to the budget. */
async function unreserve(tx: Tx, item: WorkItemRow, charge: ChargeRow): Promise<void> {
  await moveSpend(tx, { project_id: charge.project_id, day: charge.day, tokens: -charge.reserved_tokens, cost_usd: -charge.reserved_cost_usd });
  await freeHeadroom(tx, item);
}

/**
 * Part of a reservation came back: the project's budget-parked items may fit now; the claim re-checks.
 * A project without a budget has none parked (a budget removed from the config is seen at start, which
 * unparks every project's items).
 */
async function freeHeadroom(tx: Tx, item: WorkItemRow): Promise<void> {
  if (tx.hooks.budgeted(item.project_id)) await unparkBudgetItems(tx.sql, { project_id: item.project_id, now: tx.now });
}

type SpendChange = Parameters<typeof addProjectSpendAtCommit>[1];

/** Per transaction (its statement handle is its own for the closure's lifetime): spend to add at its end. */
const pendingSpend = new WeakMap<object, Map<string, SpendChange>>();

/**
 * Moves the project's running spend (llm_project_spend, one row per project and day) at the end of the
 * transaction, after its ledger append, summed into one statement per project and day (on Postgres in
 * the COMMIT's query): the row is locked only from there to the COMMIT, after the chain head, whatever
 * the daemon's `budgets` say (the LOCK ORDER of engine/tx.ts). Moved where it happened, the row stayed
 * locked while the transaction waited for the chain head: every transaction of the project queued behind
 * it, and a daemon that moved a budgeted project's spend at once (spend, then chain head) could deadlock
 * with one whose config had no budget for it (chain head, then spend). A claim deciding on a budget in
 * the same transaction adds what it reserved so far (`pendingProjectSpend`).
 */
function moveSpend(tx: Tx, change: SpendChange): Promise<void> {
  let pending = pendingSpend.get(tx.sql);
  if (!pending) {
    const created = new Map<string, SpendChange>();
    pendingSpend.set(tx.sql, created);
    atEndAfterAppend(tx, () => addPendingSpend(tx, created));
    pending = created;
  }
  const key = `${change.project_id}\0${change.day}`;
  const sum = pending.get(key);
  if (sum) {
    sum.tokens += change.tokens;
    sum.cost_usd += change.cost_usd;
  } else pending.set(key, { ...change });
  return DONE;
}

/** The project's spend this transaction has moved and not yet written (`moveSpend`): on `day`, or on every day (null). */
export function pendingProjectSpend(tx: Tx, projectId: string, day: string | null): { tokens: number; cost_usd: number } {
  const spend = { tokens: 0, cost_usd: 0 };
  for (const change of pendingSpend.get(tx.sql)?.values() ?? []) {
    if (change.project_id !== projectId || (day !== null && change.day !== day)) continue;
    spend.tokens += change.tokens;
    spend.cost_usd += change.cost_usd;
  }
  return spend;
}

type Settle = Parameters<typeof settleChargeFromResponse>[1];

/** Per transaction: a response's settle left for its spend statement to run with it (`settleAtEnd`). */
const settleWithSpend = new WeakMap<object, Settle>();

/**
 * A response's settle, at the transaction's end after its append. On a handle that runs statements in its
 * COMMIT's query, while the transaction's spend is still to be written (`addPendingSpend` runs later: it
 * was registered after this step), the first such settle is left to it: the settle and a spend row are
 * then one statement of the COMMIT's query (`settleChargeFromResponse` with `spend`), a statement fewer per
 * item. Its place moves from the append's back to the spend's, still in the COMMIT's query, behind the append.
 */
function settleAtEnd(tx: Tx, settle: Settle): Promise<void> {
  if (tx.sql.atCommit && pendingSpend.has(tx.sql) && !settleWithSpend.has(tx.sql)) {
    settleWithSpend.set(tx.sql, settle);
    return DONE;
  }
  return settleChargeFromResponse(tx.sql, settle);
}

/**
 * Writes the spend rows in sorted (project, day) order: a transaction without a ledger entry (a claim
 * round, a recovery batch of claimed items) is not serialized by the chain head, so two touching two
 * projects' rows in opposite orders could deadlock at their COMMITs (LOCK ORDER 5 in engine/tx.ts).
 * A settle left to it (`settleAtEnd`) rides with the first row that moves (one statement: which of the two
 * rows it locks first is Postgres's choice, and the charge row, the item's own, holds up no other
 * transaction: db/charges.ts `settleChargeFromResponse`), or runs alone when no row moves.
 */
async function addPendingSpend(tx: Tx, pending: Map<string, SpendChange>): Promise<void> {
  pendingSpend.delete(tx.sql);
  let settle = settleWithSpend.get(tx.sql);
  settleWithSpend.delete(tx.sql);
  // `project\0day`: the separator sorts first, so key order is (project, day) order.
  for (const key of [...pending.keys()].sort()) {
    const change = pending.get(key)!;
    if (change.tokens === 0 && change.cost_usd === 0) continue;
    if (settle) await settleChargeFromResponse(tx.sql, settle, change);
    else await addProjectSpendAtCommit(tx.sql, change);
    settle = undefined;
  }
  if (settle) await settleChargeFromResponse(tx.sql, settle);
}

/**
 * Serializes, per project, everything that decides on or changes its spend across daemons sharing a
 * database (until the transaction ends; re-entrant; nothing on SQLite). A claim deciding that a call
 * does not fit and parks the project's items, and a settlement freeing headroom and unparking them, then
 * run one after the other: either the claim sees the freed headroom, or the settlement sees the parked
 * items. Without it a settlement committing during a claim's decision would unpark nothing and leave
 * the items parked although they fit. Taken before a transaction's first ledger append (the chain
 * head and then the spend rows are the last shared locks a transaction takes: no cycle through them);
 * a transaction needing several projects' takes them all first, in sorted order (recovery), or waits
 * only for its first (a claim round). The whole order: LOCK ORDER in engine/tx.ts.
 * A project without a budget never has items parked for spend: nothing to serialize, no lock — on a
 * shared database that lock (held to the commit, behind the chain head) was the per-project queue.
 */
export function lockProjectBudget(tx: Tx, projectId: string): Promise<void> {
  return tx.hooks.budgeted(projectId) ? lockKeyForTransaction(tx.sql, `budget:${projectId}`) : DONE;
}

/** `lockProjectBudget` if no other transaction holds it; false when one does (always true on SQLite). */
export function tryLockProjectBudget(tx: Tx, projectId: string): Promise<boolean> {
  return tx.hooks.budgeted(projectId) ? tryLockKeyForTransaction(tx.sql, `budget:${projectId}`) : LOCKED;
}

const LOCKED = Promise.resolve(true);
