/**
 * A claim and its scope's lock, the two changes every claimed item makes (engine/producer.ts): on
 * Postgres in one statement, a round trip less per claimed item (a claim round usually claims one item:
 * slots free up one at a time), each change's count still its own in the result.
 */
import type { Sql } from '../core/sql.js';
import { acquireLockUnlessBusy, scopeFreeWithoutWaitingPg, TAKE_SCOPE } from './locks.js';
import {
  CLAIM_CANDIDATE_READ_PG,
  CLAIMED_ITEM_COLUMNS_PG,
  candidateOf,
  claimCandidateParams,
  claimedItemOf,
  NEXT_HEAD_COLUMNS_PG,
  NEXT_HEAD_JOIN_PG,
  type ClaimCandidate,
  type ClaimPick,
} from './item-with-thread.js';
import type { WorkItemRow } from './schema.js';
import { CLAIM_TEXT, claimText, claimWorkItem } from './work-item-claims.js';

/** The item claimed, and whether its scope was taken for it with the lease (false: undo the claim). */
export interface ClaimWithScope {
  item: WorkItemRow;
  scopeTaken: boolean;
}

/**
 * `claimWorkItem`, then, for the item it claimed, `acquireLockUnlessBusy` of its scope until the lease's
 * end: undefined when nothing was claimed (then no scope is tried). On Postgres one statement whose
 * parts are those two statements' own, in the same order (the item's row, then the scope's advisory
 * lock and row: engine/tx.ts LOCK ORDER 1, 2): the insert reads the claimed row from the update's
 * RETURNING, so it runs only for a claimed item, and the result says whether it inserted (or took over)
 * the scope's row. SQLite: the two statements.
 */
export async function claimWorkItemWithScope(
  sql: Sql,
  p: { id: string; owner: string; now: number; lease_until: number },
): Promise<ClaimWithScope | undefined> {
  if (sql.dialect !== 'postgres') {
    const item = await claimWorkItem(sql, p);
    if (!item) return undefined;
    return { item, scopeTaken: await acquireLockUnlessBusy(sql, { scope: item.lock_scope, owner: item.id, now: p.now, expires_at: p.lease_until }) };
  }
  const row = await sql.get<WorkItemRow & { scope_taken: number }>(CLAIM_WITH_SCOPE_PG, p);
  if (!row) return undefined;
  const { scope_taken, ...item } = row;
  return { item, scopeTaken: scope_taken === 1 };
}

/** A claim candidate read and claimed in one statement: the candidate as read (before its claim), and its claim. */
export interface ClaimedCandidate {
  /** The candidate as `readClaimCandidate` reads it: its item's row as it was before the claim (what an undo restores). */
  read: ClaimCandidate;
  /**
   * The claim, as `claimWorkItemWithScope`'s: undefined when the item was not claimed (another writer
   * changed it since the read, or `scopeRowFound`).
   */
  claim: ClaimWithScope | undefined;
  /**
   * The candidate's scope has a row (a lapsed holder's, whose lease expired: the read passes over live
   * ones): not claimed here, as taking that row over could not be undone by deleting it (the caller claims
   * it with its checks first: engine/producer.ts `admitThenClaim`).
   */
  scopeRowFound: boolean;
}

/**
 * Postgres only: `readClaimCandidate` of `pick`, then `claimWorkItemWithScope` of the item it read, in
 * one statement — a round trip less per claimed item, for a claim round in which nothing between the
 * read and the claim can refuse the item (no budget to decide on: engine/producer.ts; a route's breaker
 * or rate limit that holds it back after all is undone with `unclaimWorkItem` and `releaseHeldLock`).
 * The item is claimed only when its scope has no row at all, so the scope's row is always one this
 * statement inserted, which the undo deletes: a lapsed holder's row taken over (ON CONFLICT … DO UPDATE)
 * would be lost by that delete, and that holder's late finish then fail its release.
 * Restoring the row instead (its old owner and expiry, from the statement's snapshot) could put back a
 * row its holder deleted since; a scope with a lapsed row is rare (a stalled daemon), so its candidate
 * takes the read-then-claim path (`scopeRowFound`) at one round trip more.
 * The parts are those two statements' own, in the same order (the `claim:<id>` try, then the item's row,
 * then the scope's advisory lock and row: engine/tx.ts LOCK ORDER), and the group's next head is read
 * with the snapshot of the read, as `readClaimCandidate` reads it. Undefined when the group has no
 * candidate (as `readClaimCandidate`).
 */
export async function claimCandidateWithScope(
  sql: Sql,
  pick: ClaimPick,
  p: { owner: string; now: number; lease_until: number; excluded: readonly string[] },
): Promise<ClaimedCandidate | undefined> {
  const params = { ...claimCandidateParams(pick, p.now, p.excluded), owner: p.owner, lease_until: p.lease_until };
  const row = await sql.get<Record<string, unknown>>(CLAIM_CANDIDATE_WITH_SCOPE_PG, params);
  if (!row) return undefined;
  const read = candidateOf(row);
  return {
    read,
    claim: row.k_id === null ? undefined : { item: claimedItemOf(row), scopeTaken: row.x_scope_taken === 1 },
    scopeRowFound: row.x_scope_row === 1,
  };
}

// The scope's insert is db/locks.ts ACQUIRE_UNLESS_BUSY_PG with the claimed row's scope and id.
const takeScopeOf = (claimed: string) => `INSERT INTO locks (scope, owner, acquired_at, expires_at)
    SELECT c.lock_scope, c.id, CAST(@now AS bigint), CAST(@lease_until AS bigint) FROM ${claimed} c
    WHERE ${scopeFreeWithoutWaitingPg('c.lock_scope', 'c.id')}
    ${TAKE_SCOPE}
    RETURNING 1`;

const CLAIM_WITH_SCOPE_PG = `WITH claimed AS (${CLAIM_TEXT.postgres}),
  scope AS (${takeScopeOf('claimed')})
  SELECT c.*, (SELECT count(*) FROM scope) AS scope_taken FROM claimed c`;

// MATERIALIZED: the read runs once (its advisory try is volatile, so it would be anyway), before the
// claim's subquery reads its id. The candidate's columns are its row as read; `k_` the claimed row's.
// The claim only when the scope has no row (see `claimCandidateWithScope`: its insert then never takes a
// row over). A row committed after the statement's snapshot is a live holder's (inserted or taken over
// until a lease's end): the insert does not take it, and the claim is undone as any busy scope's.
const CLAIM_CANDIDATE_WITH_SCOPE_PG = `WITH c AS MATERIALIZED (${CLAIM_CANDIDATE_READ_PG}),
  scope_row AS (SELECT EXISTS (SELECT 1 FROM locks h WHERE h.scope = (SELECT lock_scope FROM c)) AS found),
  claimed AS (${claimText('postgres', '(SELECT id FROM c WHERE NOT (SELECT found FROM scope_row))')}),
  scope AS (${takeScopeOf('claimed')})
  SELECT c.*, ${NEXT_HEAD_COLUMNS_PG}, ${CLAIMED_ITEM_COLUMNS_PG}, (SELECT count(*) FROM scope) AS x_scope_taken,
    CAST((SELECT found FROM scope_row) AS int) AS x_scope_row
  FROM c LEFT JOIN claimed k ON k.id = c.id
  ${NEXT_HEAD_JOIN_PG}`;
