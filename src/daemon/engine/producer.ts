/**
 * The producer: leases up to the number of free slots in one transaction. For each slot it
 *
 *   1. asks the fair scheduler which due item goes next (class, aging, weighted round robin),
 *   2. estimates that call's maximum (prompt + max_tokens) and checks the project's budget — an item
 *      that does not fit parks its project's due items as BUDGET_EXCEEDED, with no call made,
 *   3. takes a request and the tokens from the model's rate limiter — when it says wait, nothing
 *      more is claimed and the engine sleeps until it allows,
 *   4. leases the item (one guarded UPDATE), takes its lock scope and reserves the charge.
 *
 * All of it commits together, before any provider call: an item is never leased twice, two mutations
 * of one epic never run at once, and no call starts that its budget has not reserved (lease-then-pay).
 */
import { acquireLock } from '../../db/locks.js';
import { sumProjectSpend } from '../../db/charges.js';
import type { WorkItemRow } from '../../db/schema.js';
import { getThread } from '../../db/threads.js';
import {
  claimWorkItem,
  getWorkItem,
  listClaimHeads,
  listProjectClaimHeads,
  listQueuedPastDeadline,
  parkProjectItems,
  type ClaimHead,
} from '../../db/work-items.js';
import { checkBudget, estimateCall, utcDay, type BudgetLimits, type CallEstimate } from '../../domain/budget.js';
import type { FairScheduler } from '../../domain/fair-scheduler.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { RateLimiter } from '../../domain/rate-limit.js';
import { reserveCharge, type PriceOf } from './charges.js';
import { failAttempt, type EngineContext } from './completer.js';
import { buildItemRequest } from './request.js';
import { emitWorkItem, type Tx } from './tx.js';

/** Until when a project over a total budget stays parked: until the budget is raised (and the daemon restarted). */
export const PARKED_UNTIL_RAISED = Date.UTC(9999, 11, 31);

export interface FlowControl {
  scheduler: FairScheduler;
  limiter: RateLimiter;
  budgetFor(projectId: string): BudgetLimits;
  priceOf: PriceOf;
  /** Each item's request (its operation's model and prompt) is what its estimate and rate limit are for. */
  operations: OperationRegistry;
}

export interface ClaimRound {
  claimed: WorkItemRow[];
  /** Items parked for their budget in this round. */
  parked: number;
  /** The rate limiter stopped the round: claim again at this time. */
  limitedUntil: number | null;
}

export async function claimWorkItems(tx: Tx, flow: FlowControl, owner: string, limit: number, leaseMs: number): Promise<ClaimRound> {
  const round: ClaimRound = { claimed: [], parked: 0, limitedUntil: null };
  const leaseUntil = tx.now + leaseMs;
  let heads = await listClaimHeads(tx.sql, tx.now);
  // Scopes this round has locked: an operation's scope may span projects, so another project's head
  // read before a claim may need a scope the claim just took — that project's heads are read again.
  const locked = new Set<string>();
  while (round.claimed.length < limit) {
    const pick = flow.scheduler.pick(heads, tx.now);
    if (!pick) break;
    const item = (await getWorkItem(tx.sql, pick.id))!;
    if (locked.has(item.lock_scope)) {
      heads = await replaceProjectHeads(tx, heads, pick.project_id);
      continue;
    }
    const { model, estimate } = await estimateFor(tx, flow, item);
    if (!(await fitsBudget(tx, flow, item, estimate, round))) {
      heads = await replaceProjectHeads(tx, heads, pick.project_id);
      continue;
    }
    const admission = flow.limiter.admit(model, estimate.tokens, tx.now);
    if (!admission.ok) {
      round.limitedUntil = admission.retryAt;
      break;
    }
    const leased = await claimWorkItem(tx.sql, { id: item.id, owner, now: tx.now, lease_until: leaseUntil });
    // The heads query read this transaction's own state, so the item is still queued and due.
    if (!leased) throw new Error(`work item ${item.id} was not claimable although the scheduler chose it`);
    // The heads query skipped held scopes, and this round's are checked above: this cannot fail unless
    // the table is inconsistent.
    if (!(await acquireLock(tx.sql, { scope: leased.lock_scope, owner: leased.id, now: tx.now, expires_at: leaseUntil }))) {
      throw new Error(`lock ${leased.lock_scope} is held although the claim found it free`);
    }
    locked.add(leased.lock_scope);
    await reserveCharge(tx, leased, model, estimate);
    const thread = await getThread(tx.sql, leased.thread_id);
    if (thread) emitWorkItem(tx, thread, leased);
    round.claimed.push(leased);
    heads = await replaceProjectHeads(tx, heads, pick.project_id);
  }
  return round;
}

/**
 * The heads after a claim or a park in `projectId`: only that project's are re-read (a scope the claim
 * locked that another project's head needs is caught by the round's `locked` set) instead of every
 * group — a round of many claims across hundreds of projects would otherwise walk them all once per claim.
 */
async function replaceProjectHeads(tx: Tx, heads: ClaimHead[], projectId: string): Promise<ClaimHead[]> {
  return [...heads.filter((h) => h.project_id !== projectId), ...(await listProjectClaimHeads(tx.sql, projectId, tx.now))];
}

/** The model of the item's next call and the most it can bill; a request that cannot be built (target gone) reserves max_tokens. */
async function estimateFor(tx: Tx, flow: FlowControl, item: WorkItemRow): Promise<{ model: string; estimate: CallEstimate }> {
  const thread = await getThread(tx.sql, item.thread_id);
  const built = thread ? await buildItemRequest(tx.sql, flow.operations, thread, item) : null;
  if (built?.ok) return { model: built.request.model, estimate: estimateCall(built.request, flow.priceOf(built.request.model)) };
  const params = flow.operations.defaultParams;
  return { model: params.model, estimate: { tokens: params.maxTokens, cost_usd: 0 } };
}

/**
 * Whether the project can afford the call. If not, its due items are parked — until the next UTC
 * midnight when only a daily limit is in the way, else until the budget is raised — and the scheduler
 * no longer sees them. A settled or released reservation of the project unparks them (engine/charges.ts).
 */
async function fitsBudget(tx: Tx, flow: FlowControl, item: WorkItemRow, estimate: CallEstimate, round: ClaimRound): Promise<boolean> {
  const limits = flow.budgetFor(item.project_id);
  if (Object.values(limits).every((v) => v === undefined)) return true;
  const spent = {
    today: await sumProjectSpend(tx.sql, item.project_id, utcDay(tx.now)),
    total: await sumProjectSpend(tx.sql, item.project_id, null),
  };
  const verdict = checkBudget(limits, spent, estimate, tx.now);
  if (verdict.ok) return true;
  const until = verdict.retryAt ?? PARKED_UNTIL_RAISED;
  const resume = verdict.retryAt ? `resumes at ${new Date(verdict.retryAt).toISOString()}` : 'resumes when the budget is raised';
  const message = `project ${item.project_id} is over budget (${verdict.reason}); no call was made, the item ${resume}`;
  const parkedItems = await parkProjectItems(tx.sql, { project_id: item.project_id, now: tx.now, until, message });
  // The chosen item was due, so it is among them; without this the round would pick it forever.
  if (parkedItems.length === 0) throw new Error(`work item ${item.id} could not be parked`);
  for (const parked of parkedItems) {
    const thread = await getThread(tx.sql, parked.thread_id);
    if (thread) emitWorkItem(tx, thread, parked);
    round.parked++;
  }
  return false;
}

/** Ends queued items whose deadline passed before they could start (SKIPPED_DEADLINE). */
export async function skipItemsPastDeadline(tx: Tx, ctx: EngineContext, limit = 500): Promise<number> {
  const late = await listQueuedPastDeadline(tx.sql, tx.now, limit);
  for (const item of late) {
    await failAttempt(tx, ctx, item, {
      code: 'SKIPPED_DEADLINE',
      class: 'permanent',
      message: `the deadline passed at ${new Date(item.deadline_at!).toISOString()} before the work started`,
    });
  }
  return late.length;
}
