/**
 * locks: visible, inspectable mutual exclusion, named by the operation (`epic:{project}:{epic}`,
 * `project:{project}`, …). A row is a held lock; its owner is the work item whose mutation it guards, or
 * the orchestration thread that holds it while its children run. `expires_at` makes an abandoned lock
 * reclaimable; null means held until released.
 */
import { StaleStateError } from '../core/errors.js';
import type { Sql } from '../core/sql.js';
import type { LockRow } from './schema.js';
import { skipLockedLockRows } from './dialect.js';
import { changedOne } from './statements.js';

export const TAKE_SCOPE = `ON CONFLICT (scope) DO UPDATE
       SET owner = excluded.owner, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
       WHERE locks.owner = excluded.owner OR (locks.expires_at IS NOT NULL AND locks.expires_at <= @now)`;

const ACQUIRE = `INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES (@scope, @owner, @now, @expires_at)
     ${TAKE_SCOPE}`;

/**
 * The Postgres conditions under which `owner` may insert `scope` without waiting (SQL expressions: a
 * parameter, or a column of the row a statement claims: db/claim-with-scope.ts). NOT EXISTS: a scope a
 * live holder has committed is not inserted at all — a conflicting insert locks the holder's row to check
 * TAKE_SCOPE's condition, even when it fails, and that row lock was held to the claim's commit. The
 * advisory try: another transaction taking the scope right now is passed over, never waited for.
 */
export function scopeFreeWithoutWaitingPg(scope: string, owner: string): string {
  return `NOT EXISTS (SELECT 1 FROM locks h WHERE h.scope = ${scope} AND h.owner <> ${owner} AND (h.expires_at IS NULL OR h.expires_at > @now))
       AND pg_try_advisory_xact_lock(hashtextextended('lock:' || ${scope}, 0))`;
}

// The casts: a SELECT's parameters are not typed by the columns they go to.
const ACQUIRE_UNLESS_BUSY_PG = `INSERT INTO locks (scope, owner, acquired_at, expires_at)
     SELECT @scope, @owner, CAST(@now AS bigint), CAST(@expires_at AS bigint)
     WHERE ${scopeFreeWithoutWaitingPg('@scope', '@owner')}
     ${TAKE_SCOPE}`;

/**
 * Takes `scope` for `owner` if it is free, expired, or already the owner's. Returns false when a live
 * holder has it.
 */
export function acquireLock(sql: Sql, p: { scope: string; owner: string; now: number; expires_at: number | null }): Promise<boolean> {
  return changedOne(sql, ACQUIRE, p);
}

/**
 * `acquireLock` for a claim (a claim round, the recovery scan's take-over) and for the heartbeat re-taking
 * an expired scope (`extendLeases`), none of which may wait for another daemon's transaction: false also
 * when another transaction is taking `scope` right now. Two claim rounds each inserting a scope the
 * other inserts next waited for each other's uncommitted row (a deadlock, broken after
 * `deadlock_timeout`); here the second passes over the item, as the claim passes over a locked item
 * (SKIP LOCKED). Postgres: the insert runs only if this transaction takes the scope's advisory lock
 * (`pg_try_advisory_xact_lock`, held to its end), in the same statement; two scopes sharing a 64-bit
 * hash only pass over each other. SQLite (one writer): `acquireLock`'s statement.
 */
export function acquireLockUnlessBusy(sql: Sql, p: { scope: string; owner: string; now: number; expires_at: number | null }): Promise<boolean> {
  return changedOne(sql, sql.dialect === 'postgres' ? ACQUIRE_UNLESS_BUSY_PG : ACQUIRE, p);
}

/** Releases `scope` if `owner` still holds it. */
export function releaseLock(sql: Sql, scope: string, owner: string): Promise<boolean> {
  return changedOne(sql, 'DELETE FROM locks WHERE scope = ? AND owner = ?', [scope, owner]);
}

/** A lock row a transaction holds and releases at a thread's end (a leased item's scope lock), and what to say if it is gone. */
export interface HeldLock {
  scope: string;
  owner: string;
  lost: string;
}

/** Deletes a lock row the transaction holds: StaleStateError when it is not held any more (another may have held the scope meanwhile). */
export async function releaseHeldLock(sql: Sql, held: HeldLock): Promise<void> {
  if (!(await releaseLock(sql, held.scope, held.owner))) throw new StaleStateError(held.lost);
}

const EXTEND = 'UPDATE locks SET expires_at = @expires_at WHERE scope = @scope AND owner = @owner';

// An expired row is extended only under the scope's advisory lock (the one `acquireLockUnlessBusy` tries):
// a claim taking the row over right now holds it (then nothing matches, no wait), or the claim's try fails
// once this holds it — so a claim never waits for a heartbeat's row, nor a heartbeat for a claim's.
const EXTEND_PG = `${EXTEND}
       AND (expires_at IS NULL OR expires_at > @now OR pg_try_advisory_xact_lock(hashtextextended('lock:' || @scope, 0)))`;

/**
 * Extends `scope`'s expiry if `owner` still holds it (the heartbeat). False when another owner has it,
 * or, on Postgres, when it expired and another transaction is taking it right now (as `acquireLockUnlessBusy`).
 */
export function extendLock(sql: Sql, p: { scope: string; owner: string; now: number; expires_at: number }): Promise<boolean> {
  return changedOne(sql, sql.dialect === 'postgres' ? EXTEND_PG : EXTEND, p);
}

export async function getLock(sql: Sql, scope: string): Promise<LockRow | undefined> {
  return (await sql.get('SELECT * FROM locks WHERE scope = ?', [scope])) as LockRow | undefined;
}

/**
 * Releases every lock `owner` holds (an orchestration ending, a thread canceled); returns how many. Not
 * an error when it is none: a canceled work thread's locks are its items', and an orchestration's lock
 * may already have been swept while it was not active (`releaseOrphanedLocks`).
 */
export async function releaseLocksOwnedBy(sql: Sql, owner: string): Promise<number> {
  return (await sql.run('DELETE FROM locks WHERE owner = ?', [owner])).changes;
}

/**
 * Deletes locks whose owner is gone, whatever their scope: the owner is neither a work item that holds
 * a lease (claimed, running) nor a thread still open or running. Owners are ids unique across both
 * tables, so one condition covers item locks and orchestration locks. Returns the released scopes.
 *
 * On Postgres the candidates are locked first, passing over lock rows another daemon's transaction is
 * writing: a claim taking an expired lock for a new item has not committed the item's lease yet, so
 * this statement's snapshot would call its fresh lock orphaned (a DELETE waiting for that row re-checks
 * the row, not the NOT EXISTS subqueries). Skipped rows are looked at by the next sweep.
 */
export async function releaseOrphanedLocks(sql: Sql): Promise<string[]> {
  const rows = (await sql.all(`DELETE FROM locks
     WHERE scope IN (
       SELECT l.scope FROM locks l
       WHERE NOT EXISTS (SELECT 1 FROM llm_work_items w WHERE w.id = l.owner AND w.status IN ('claimed', 'running'))
         AND NOT EXISTS (SELECT 1 FROM llm_threads t WHERE t.id = l.owner AND t.status IN ('open', 'running'))${skipLockedLockRows(sql.dialect)})
     RETURNING scope`)) as { scope: string }[];
  return rows.map((r) => r.scope);
}
