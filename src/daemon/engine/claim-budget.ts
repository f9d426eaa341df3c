/**
 * A claim round's budget decision (engine/producer.ts): whether a budgeted project can afford an item's
 * call, under the project's budget lock, parking its due items when it cannot.
 */
import { sumProjectSpend } from '../../db/charges.js';
import type { WorkItemRow } from '../../db/schema.js';
import { getThread } from '../../db/threads.js';
import { parkProjectItems } from '../../db/work-item-claims.js';
import { checkBudget, utcDay, type BudgetLimits, type CallEstimate } from '../../domain/budget.js';
import { lockProjectBudget, pendingProjectSpend, tryLockProjectBudget } from './charges.js';
import { emitWorkItem, type Tx } from './tx.js';

/** Until when a project over a total budget stays parked: until the budget is raised (and the daemon restarted). */
export const PARKED_UNTIL_RAISED = Date.UTC(9999, 11, 31);

/**
 * Whether the project can afford the call. If not, its due items are parked — until the next UTC
 * midnight when only a daily limit is in the way, else until the budget is raised — and the scheduler
 * no longer sees them. A settled or released reservation of the project unparks them (engine/charges.ts).
 * Called only for a project with a budget (`tx.hooks.budgeted`; most have none: then no await).
 */
export async function fitsBudget(
  tx: Tx,
  budgetFor: (projectId: string) => BudgetLimits,
  item: WorkItemRow,
  estimate: CallEstimate,
  round: RoundHolds,
  budgetLocks: Map<string, boolean>,
): Promise<boolean> {
  const limits = budgetFor(item.project_id); // at least one (budgeted)
  // Daemons sharing a database decide one after another per project, each seeing the reservations the
  // others committed: together they never reserve past the budget (held until this claim commits).
  if (!(await takeBudgetLock(tx, item.project_id, budgetLocks))) {
    round.limitedUntil = Math.min(round.limitedUntil ?? Number.POSITIVE_INFINITY, tx.now + BUDGET_BUSY_RETRY_MS);
    return false;
  }
  // What this round reserved is written at its end (engine/charges.ts `moveSpend`): added here.
  const today = utcDay(tx.now);
  const spent = {
    today: plus(await sumProjectSpend(tx.sql, item.project_id, today), pendingProjectSpend(tx, item.project_id, today)),
    total: plus(await sumProjectSpend(tx.sql, item.project_id, null), pendingProjectSpend(tx, item.project_id, null)),
  };
  const verdict = checkBudget(limits, spent, estimate, tx.now);
  if (verdict.ok) return true;
  const until = verdict.retryAt ?? PARKED_UNTIL_RAISED;
  const resume = verdict.retryAt ? `resumes at ${new Date(verdict.retryAt).toISOString()}` : 'resumes when the budget is raised';
  const message = `project ${item.project_id} is over budget (${verdict.reason}); no call was made, the item ${resume}`;
  // None when another daemon sharing the database parked or claimed them while this claim waited for
  // the budget lock: they are no longer candidates either way.
  const parkedItems = await parkProjectItems(tx.sql, { project_id: item.project_id, now: tx.now, until, message });
  for (const parked of parkedItems) {
    const thread = await getThread(tx.sql, parked.thread_id);
    if (thread) emitWorkItem(tx, thread, parked);
    round.parked++;
  }
  return false;
}

function plus(a: { tokens: number; cost_usd: number }, b: { tokens: number; cost_usd: number }): { tokens: number; cost_usd: number } {
  return { tokens: a.tokens + b.tokens, cost_usd: a.cost_usd + b.cost_usd };
}

/** What the round (engine/producer.ts `ClaimRound`) counts of the items it held back. */
interface RoundHolds {
  /** Items parked for their budget. */
  parked: number;
  /** When to claim again (null: when woken). */
  limitedUntil: number | null;
}

/** How soon a claim round looks again at a project whose budget another daemon was deciding on. */
const BUDGET_BUSY_RETRY_MS = 50;

/**
 * The project's budget lock for this claim round (`held`: the round's, true when held, false when found
 * busy). The round's first is waited for; a later one is only tried: a round takes projects in its
 * scheduler's order, and two daemons' rounds each waiting for the other's next project would deadlock.
 * A project found busy waits for a later round (nothing of it is parked or claimed).
 */
async function takeBudgetLock(tx: Tx, projectId: string, held: Map<string, boolean>): Promise<boolean> {
  const known = held.get(projectId);
  if (known !== undefined) return known;
  let taken = true;
  if ([...held.values()].some(Boolean)) taken = await tryLockProjectBudget(tx, projectId);
  else await lockProjectBudget(tx, projectId);
  held.set(projectId, taken);
  return taken;
}
