/**
 * The producer: leases up to the number of free slots in one transaction. For each slot it
 *
 *   1. asks the fair scheduler which due item goes next (class, aging, this daemon's own projects when
 *      several share the database, weighted round robin),
 *   2. estimates that call's maximum (prompt + max_tokens) and checks the project's budget — an item
 *      that does not fit parks its project's due items as BUDGET_EXCEEDED, with no call made,
 *   3. takes a request and the tokens from the model's rate limiter — when it says wait, nothing
 *      more is claimed and the engine sleeps until it allows,
 *   4. leases the item (one guarded UPDATE), takes its lock scope and reserves the charge.
 *
 * On Postgres an item of a project without a budget is read and leased, its scope taken, in one
 * statement before 3 (nothing else between the read and the claim can refuse it); a route that then
 * cannot take the call undoes that claim, in the same transaction.
 *
 * All of it commits together, before any provider call: an item is never leased twice, two mutations
 * of one epic never run at once, and no call starts that its budget has not reserved (lease-then-pay).
 */
import { readClaimCandidate, type ClaimCandidate, type ClaimPick, type ItemWithThread } from '../../db/item-with-thread.js';
import { claimCandidateWithScope, claimWorkItemWithScope } from '../../db/claim-with-scope.js';
import { releaseHeldLock } from '../../db/locks.js';
import type { WorkItemRow } from '../../db/schema.js';
import { listQueuedPastDeadline } from '../../db/work-items.js';
import { listClaimHeads, listProjectClaimHeads, unclaimWorkItem, type ClaimHead } from '../../db/work-item-claims.js';
import { estimateCall, type BudgetLimits, type CallEstimate } from '../../domain/budget.js';
import type { FairScheduler } from '../../domain/fair-scheduler.js';
import type { OwnProjects } from '../../domain/project-owners.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { RateLimiter } from '../../domain/rate-limit.js';
import type { ModelRoute, ModelRouter } from '../routing/router.js';
import { reserveCharge } from './charges.js';
import type { Admitted, RoundAdmissions } from './claim-admissions.js';
import { admissionOf, releaseAdmission } from './route-admission.js';
import { fitsBudget } from './claim-budget.js';
import type { SharedRateLimits } from './shared-rate-limits.js';
import { failAttempt } from './failures.js';
import type { EngineContext } from './leased.js';
import { buildItemRequest, type BuiltRequest } from './request.js';
import { emitWorkItem, type Tx } from './tx.js';

export interface FlowControl {
  scheduler: FairScheduler;
  /** Keyed by route (`ModelRoute.key`): the model on its endpoint. */
  limiter: RateLimiter;
  /** Several daemons on one Postgres: the buckets and the 429 park they share (null: one daemon, `limiter` alone). */
  sharedLimits?: SharedRateLimits | null;
  budgetFor(projectId: string): BudgetLimits;
  /** Each item's logical model → its route: the endpoint (and its breaker), price and limits of its call. */
  router: ModelRouter;
  /** Each item's request (its operation's model and prompt) is what its estimate and rate limit are for. */
  operations: OperationRegistry;
  /** Several daemons on one Postgres: the projects this daemon claims first (null: one daemon, no preference). */
  owners: OwnProjects | null;
}

export interface ClaimedItem {
  item: WorkItemRow;
  /** Where its call goes. */
  route: ModelRoute;
  /** Its thread's trace context (null for threads created before trace ids existed). */
  traceparent: string | null;
  /**
   * The request its estimate was made for (null: it could not be built; the start builds it again and
   * fails the item). The start records and sends exactly this request, so what the claim reserved is
   * what the call can bill, and the request is built once per item (see starts.ts `planStart`).
   */
  request: BuiltRequest | null;
  /** What its route's admission took (the limiter's share, a half-open probe): given back if its start makes no call. */
  admission: Admitted;
}

export interface ClaimRound {
  claimed: ClaimedItem[];
  /** Items parked for their budget in this round. */
  parked: number;
  /** A rate limit or an open breaker held some items back: claim again at this time (null: when woken). */
  limitedUntil: number | null;
  /** An endpoint's open (or probing) breaker held an item back. */
  breakerHeld: boolean;
}

export interface ClaimLimits {
  /** Only items of this priority class or a more urgent one (resource pressure pauses bulk and scheduled work). */
  maxPriority?: number;
}

/**
 * One claim round in `tx`: up to `limit` items leased to `owner`, each with its scope and reservation. The
 * rate-limit tokens and half-open probes it takes are noted in `admissions`, to be given back if `tx` does not commit
 * (claim-admissions.ts).
 */
export async function claimWorkItems(
  tx: Tx,
  flow: FlowControl,
  owner: string,
  limit: number,
  leaseMs: number,
  admissions: RoundAdmissions,
  limits: ClaimLimits = {},
): Promise<ClaimRound> {
  const round: ClaimRound = { claimed: [], parked: 0, limitedUntil: null, breakerHeld: false };
  const leaseUntil = tx.now + leaseMs;
  // Items held back this round (their route cannot take a call now): not offered to the scheduler again.
  const skipped = new Set<string>();
  // Groups found to have nothing this round can claim (sharing the database: other daemons' rounds are
  // taking their items): their heads leave this round's view, and a project's re-read leaves them out.
  const passed = new Set<string>();
  const eligible = (h: ClaimHead) => (limits.maxPriority === undefined || h.priority <= limits.maxPriority) && (passed.size === 0 || !passed.has(groupOf(h)));
  const allHeads = await listClaimHeads(tx.sql, tx.now);
  // Sharing the database, this daemon's own projects go first (domain/fair-scheduler.ts rule 3): owners
  // are assigned over every project with queued work, as every daemon sees them (not this one's eligible).
  let own = flow.owners?.ownAmong(allHeads) ?? null;
  const heads = allHeads.filter(eligible);
  const refresh = (projectId: string) => replaceProjectHeads(tx, heads, projectId, skipped, eligible);
  // An item held back (a route's rate limit or breaker, a busy budget lock) and its project's re-read: an
  // own project then competes as any other for the rest of the round (the set is the cached view's:
  // copied, not changed), so the round takes its WRR turns instead of walking all its held items first.
  const holdBack = (item: WorkItemRow) => {
    skipped.add(item.id);
    if (own?.has(item.project_id)) own = new Set([...own].filter((p) => p !== item.project_id));
    return refresh(item.project_id);
  };
  // Scopes this round has locked: an operation's scope may span projects, so another project's head
  // read before a claim may need a scope the claim just took — that project's heads are read again.
  const locked = new Set<string>();
  const budgetLocks = new Map<string, boolean>();
  // Postgres: claim first, then admit, until a route holds an item back — then read first for the rest of
  // the round: a held item costs a read, not a claim and its undo (the round walks every held item's
  // project while a 429 park, an open breaker or a provider window lasts).
  let claimFirst = tx.sql.dialect === 'postgres';
  while (round.claimed.length < limit) {
    const pick = flow.scheduler.pick(heads, tx.now, own);
    if (!pick) break;
    const context: RoundClaimContext = { owner, leaseUntil, excluded: skipped.size === 0 ? NONE_SKIPPED : [...skipped], locked, admissions };
    // Postgres, no budget to decide on between the candidate's read and its claim: both in one statement
    // (a round trip less per claimed item); otherwise the read, the checks, then the claim.
    const oneStatement = claimFirst && !tx.hooks.budgeted(pick.project_id);
    const step = oneStatement
      ? await claimThenAdmit(tx, flow, pick, context, round, budgetLocks)
      : await admitThenClaim(tx, flow, pick, context, round, budgetLocks);
    if (oneStatement && step.outcome === 'held') claimFirst = false;
    if (step.outcome === 'none') {
      passGroup(heads, pick, passed);
      continue;
    }
    if (step.outcome === 'held') {
      // Parked, over its route's limits or breaker, or its budget lock busy: never picked again this round.
      await holdBack(step.item);
      continue;
    }
    if (step.outcome === 'lost') {
      if (step.item) skipped.add(step.item.id);
      await refresh(pick.project_id);
      continue;
    }
    const { read, leased, route, estimate, request, admission } = step;
    locked.add(leased.lock_scope);
    // The daemon's own zero-cost route (the canary) reserves nothing: it is no one's spending.
    if (!route.free) await reserveCharge(tx, leased, route.key, estimate);
    // The thread read for the estimate, in this transaction: what the event and the span take from it
    // (ids, parent, trace context) never changes.
    emitWorkItem(tx, read.thread, leased);
    round.claimed.push({ item: leased, route, traceparent: read.thread.traceparent, request, admission });
    // Postgres: the group's next head came with the candidate's read (no re-read: a round trip per
    // claimed item); the project's other groups keep their heads unless one is of the scope this claim
    // took — no longer claimable, its age could rank the project in a class it no longer has: the
    // project's heads are read again then. SQLite re-reads the project's heads.
    if (read.nextHead === undefined || !replaceGroupHead(heads, pick, read.nextHead, leased.lock_scope, eligible)) await refresh(pick.project_id);
  }
  return round;
}

/** What each claim of a round shares: who claims, until when, what the round passes over. */
interface RoundClaimContext {
  /** The claiming daemon: the leases' owner. */
  owner: string;
  /** The leases' end. */
  leaseUntil: number;
  /** The round's skipped items (not candidates again). */
  excluded: readonly string[];
  /** Scopes the round has locked. */
  locked: ReadonlySet<string>;
  /** What the round's admissions took (rate-limit tokens, half-open probes). */
  admissions: RoundAdmissions;
}

/**
 * One pick's claim: `none` (its group has no candidate now: passed for the round), `held` (the item can
 * not run now: held back, its project re-read), `lost` (taken or changed by another writer, or its scope
 * busy: passed over, its project re-read), or the item claimed with its route and what its call reserves.
 */
type ClaimStep =
  | { outcome: 'none' }
  | { outcome: 'held'; item: WorkItemRow }
  | { outcome: 'lost'; item: WorkItemRow | null }
  | {
      outcome: 'claimed';
      read: ClaimCandidate;
      leased: WorkItemRow;
      route: ModelRoute;
      estimate: CallEstimate;
      request: BuiltRequest | null;
      admission: Admitted;
    };

/**
 * The read of `pick`'s candidate, its budget and its route's limits, then its claim: what a budgeted
 * project's claim does (the budget is decided before the claim, under its lock), and SQLite's.
 */
async function admitThenClaim(
  tx: Tx,
  flow: FlowControl,
  pick: ClaimPick,
  context: RoundClaimContext,
  round: ClaimRound,
  budgetLocks: Map<string, boolean>,
): Promise<ClaimStep> {
  // The item and its thread in one statement: the estimate builds the request from both. Sharing the
  // database, the group's next item when other daemons' rounds are taking the head, or none.
  const read = await readClaimCandidate(tx.sql, pick, tx.now, context.excluded);
  if (!read) return NO_CANDIDATE;
  const { item } = read;
  if (context.locked.has(item.lock_scope)) return { outcome: 'lost', item: null };
  const { route, estimate, request } = await estimateFor(tx, flow, read);
  // Parked (or, sharing the database, taken by another daemon meanwhile; or its budget lock busy).
  if (!route.free && tx.hooks.budgeted(item.project_id) && !(await fitsBudget(tx, flow.budgetFor, item, estimate, round, budgetLocks)))
    return { outcome: 'held', item };
  const admission = await admissionOf(tx, flow, route, estimate, round, context.admissions);
  if (!admission) return { outcome: 'held', item };
  const claim = await claimWorkItemWithScope(tx.sql, { id: item.id, owner: context.owner, now: tx.now, lease_until: context.leaseUntil });
  // Alone on the database the heads query read this transaction's own state, so this cannot miss;
  // sharing it, no other round claims the item while this one holds its claim lock (readClaimCandidate),
  // but another write (a cancel, a park) may have changed it since the read. The heads query skipped held scopes,
  // and this round's are checked above; sharing the database, another daemon may have taken the scope
  // for another item since, or be taking it now (not waited for: two rounds taking two scopes in
  // crossing order deadlocked): the claim is undone. Either way the item is passed over, and a
  // half-open breaker's probe and the limiter's tokens it took are freed (no call will follow).
  // The scope is tried with the claim, in its statement (db/claim-with-scope.ts).
  if (!claim?.scopeTaken) {
    if (claim) await unclaimWorkItem(tx.sql, { owner: context.owner, before: item });
    await releaseAdmission(tx, flow, route, estimate, context.admissions);
    return { outcome: 'lost', item };
  }
  return { outcome: 'claimed', read, leased: claim.item, route, estimate, request, admission };
}

/**
 * Postgres, a project without a budget: `pick`'s candidate read and claimed, its scope taken, in one
 * statement (db/claim-with-scope.ts `claimCandidateWithScope`); then its route's breaker and rate limits,
 * which rarely hold a call back (an open breaker, a 429's park, a provider's window): then the claim is
 * undone (its scope's row released, the item queued again as it was), each a guarded statement, and the
 * item held back as `admitThenClaim` holds it. Nothing else decides between the read and the claim: the
 * scopes this round locked are this transaction's rows, which the statement's read passes over. A shared
 * bucket's row (a route with a configured rate limit) is then taken after the item's row and scope
 * instead of before them: nothing waits for those (claims take items with SKIP LOCKED and scopes only by
 * trying), but a round holding a bucket may wait for a later claim's budget lock — the rare cycle
 * engine/tx.ts notes under LOCK ORDER ("Not strictly in the order"), as for any claim of a round after its first. A
 * candidate whose scope has a lapsed holder's row is claimed by `admitThenClaim` instead (see
 * db/claim-with-scope.ts: the undo could not put that row back).
 */
async function claimThenAdmit(
  tx: Tx,
  flow: FlowControl,
  pick: ClaimPick,
  context: RoundClaimContext,
  round: ClaimRound,
  budgetLocks: Map<string, boolean>,
): Promise<ClaimStep> {
  const claimed = await claimCandidateWithScope(tx.sql, pick, {
    owner: context.owner,
    now: tx.now,
    lease_until: context.leaseUntil,
    excluded: context.excluded,
  });
  if (!claimed) return NO_CANDIDATE;
  if (claimed.scopeRowFound) return admitThenClaim(tx, flow, pick, context, round, budgetLocks);
  const { read, claim } = claimed;
  // Changed by another write since the read, or its scope taken by another daemon: as in `admitThenClaim`.
  if (!claim?.scopeTaken) {
    if (claim) await unclaimWorkItem(tx.sql, { owner: context.owner, before: read.item });
    return { outcome: 'lost', item: read.item };
  }
  const { route, estimate, request } = await estimateFor(tx, flow, read);
  const admission = await admissionOf(tx, flow, route, estimate, round, context.admissions);
  if (!admission) {
    await releaseHeldLock(tx.sql, {
      scope: claim.item.lock_scope,
      owner: claim.item.id,
      lost: `the lock of scope ${claim.item.lock_scope} this claim took is gone`,
    });
    await unclaimWorkItem(tx.sql, { owner: context.owner, before: read.item });
    return { outcome: 'held', item: read.item };
  }
  return { outcome: 'claimed', read, leased: claim.item, route, estimate, request, admission };
}

const NO_CANDIDATE: ClaimStep = { outcome: 'none' };

/**
 * The heads after a claim or a park in `projectId`: only that project's are re-read (a scope the claim
 * locked that another project's head needs is caught by the round's `locked` set) instead of every
 * group — a round of many claims across hundreds of projects would otherwise walk them all once per claim.
 * Only the re-read heads are checked against `eligible`: the others were when they were read (one more
 * pass and array over every head per claim showed at 200 projects). `heads` is the round's own array,
 * changed in place: two new arrays over every head per claim showed in the allocation profile.
 */
async function replaceProjectHeads(
  tx: Tx,
  heads: ClaimHead[],
  projectId: string,
  skipped: ReadonlySet<string>,
  eligible: (h: ClaimHead) => boolean,
): Promise<void> {
  const reread = await listProjectClaimHeads(tx.sql, projectId, tx.now, skipped.size === 0 ? NONE_SKIPPED : [...skipped]);
  let kept = 0;
  for (const h of heads) if (h.project_id !== projectId) heads[kept++] = h;
  heads.length = kept;
  for (const h of reread) if (eligible(h)) heads.push(h);
}

/**
 * `pick`'s group's head in `heads` (in place) becomes `next` (none: the group leaves the round's view);
 * false when another group of the project is headed by an item of `takenScope` (its head is stale: the
 * caller re-reads the project's heads). One pass over the heads does both.
 */
function replaceGroupHead(heads: ClaimHead[], pick: ClaimPick, next: ClaimHead | null, takenScope: string, eligible: (h: ClaimHead) => boolean): boolean {
  let kept = 0;
  let fresh = true;
  for (const h of heads) {
    if (h.project_id !== pick.project_id) heads[kept++] = h;
    else if (h.priority !== pick.priority) {
      heads[kept++] = h;
      if (h.lock_scope === takenScope) fresh = false;
    }
  }
  heads.length = kept;
  if (next && eligible(next)) heads.push(next);
  return fresh;
}

const NONE_SKIPPED: readonly string[] = [];

function groupOf(h: ClaimPick): string {
  return `${h.priority}:${h.project_id}`;
}

/** Takes `pick`'s group out of the round: its heads leave `heads` (in place), and `passed` keeps it out of re-reads. */
function passGroup(heads: ClaimHead[], pick: ClaimPick, passed: Set<string>): void {
  passed.add(groupOf(pick));
  let kept = 0;
  for (const h of heads) if (h.project_id !== pick.project_id || h.priority !== pick.priority) heads[kept++] = h;
  heads.length = kept;
}

/** The route of the item's next call and the most it can bill; a request that cannot be built (target gone) reserves max_tokens on the default route. */
async function estimateFor(
  tx: Tx,
  flow: FlowControl,
  read: ItemWithThread,
): Promise<{ route: ModelRoute; estimate: CallEstimate; request: BuiltRequest | null }> {
  const built = await buildItemRequest(tx.sql, flow.operations, read);
  if (built.ok) {
    const route = flow.router.route(built.model);
    return { route, estimate: estimateCall(built.request, route.price), request: built };
  }
  return { route: flow.router.defaultRoute, estimate: { tokens: flow.operations.defaultParams.maxTokens, cost_usd: 0 }, request: null };
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
