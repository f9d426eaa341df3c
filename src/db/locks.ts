/**
 * locks: visible, inspectable mutual exclusion, named by the operation (`epic:{project}:{epic}`,
 * `project:{project}`, …). A row is a held lock; its owner is the work item whose mutation it guards, or
 * the orchestration thread that holds it while its children run. `expires_at` makes an abandoned lock
 * reclaimable; null means held until released.
 */
import type { Db } from './connection.js';
import type { LockRow } from './schema.js';
import { prepared } from './statements.js';

/**
 * Takes `scope` for `owner` if it is free, expired, or already the owner's. Returns false when a live
 * holder has it.
 */
export function acquireLock(db: Db, p: { scope: string; owner: string; now: number; expires_at: number | null }): boolean {
  const result = prepared(
    db,
    `INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES (@scope, @owner, @now, @expires_at)
     ON CONFLICT (scope) DO UPDATE
       SET owner = excluded.owner, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at
       WHERE locks.owner = excluded.owner OR (locks.expires_at IS NOT NULL AND locks.expires_at <= @now)`,
  ).run(p);
  return result.changes === 1;
}

/** Releases `scope` if `owner` still holds it. */
export function releaseLock(db: Db, scope: string, owner: string): boolean {
  return prepared(db, 'DELETE FROM locks WHERE scope = ? AND owner = ?').run(scope, owner).changes === 1;
}

export function extendLock(db: Db, scope: string, owner: string, expiresAt: number): boolean {
  return prepared(db, 'UPDATE locks SET expires_at = ? WHERE scope = ? AND owner = ?').run(expiresAt, scope, owner).changes === 1;
}

export function getLock(db: Db, scope: string): LockRow | undefined {
  return prepared(db, 'SELECT * FROM locks WHERE scope = ?').get(scope) as LockRow | undefined;
}

/**
 * Releases every lock `owner` holds (an orchestration ending, a thread canceled); returns how many. Not
 * an error when it is none: a canceled work thread's locks are its items', and an orchestration's lock
 * may already have been swept while it was not active (`releaseOrphanedLocks`).
 */
export function releaseLocksOwnedBy(db: Db, owner: string): number {
  return prepared(db, 'DELETE FROM locks WHERE owner = ?').run(owner).changes;
}

/**
 * Deletes locks whose owner is gone, whatever their scope: the owner is neither a work item that holds
 * a lease (claimed, running) nor a thread still open or running. Owners are ids unique across both
 * tables, so one condition covers item locks and orchestration locks. Returns the released scopes.
 */
export function releaseOrphanedLocks(db: Db): string[] {
  const rows = prepared(
    db,
    `DELETE FROM locks
     WHERE NOT EXISTS (SELECT 1 FROM llm_work_items w WHERE w.id = locks.owner AND w.status IN ('claimed', 'running'))
       AND NOT EXISTS (SELECT 1 FROM llm_threads t WHERE t.id = locks.owner AND t.status IN ('open', 'running'))
     RETURNING scope`,
  ).all() as { scope: string }[];
  return rows.map((r) => r.scope);
}
