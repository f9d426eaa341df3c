/**
 * The leases of llm_work_items (owner + expiry, taken by the claim in work-item-claims.ts): their heartbeat, and
 * the recovery scans that find expired or orphaned leases and take them over — each take-over one
 * guarded UPDATE, so two rescuers can never both own an item.
 */
import type { Sql } from '../core/sql.js';
import type { WorkItemStatus } from '../domain/states.js';
import type { WorkItemRow } from './schema.js';
import { skipLockedRows } from './dialect.js';
import { expectOneChange } from './statements.js';

/**
 * Leased items whose lease has expired (their worker died or stalled), oldest expiry first, for the
 * recovery scan's transaction: on Postgres locked for it, passing over rows another daemon is
 * rescuing or heartbeating right now (db/dialect.ts `skipLockedRows`).
 */
export async function lockExpiredLeases(sql: Sql, now: number, limit: number): Promise<WorkItemRow[]> {
  return (await sql.all(
    `SELECT * FROM llm_work_items INDEXED BY idx_work_items_leased
     WHERE status IN ('claimed', 'running') AND lease_expires_at <= ?
     ORDER BY lease_expires_at LIMIT ?${skipLockedRows(sql.dialect)}`,
    [now, limit],
  )) as WorkItemRow[];
}

/**
 * At the start of a daemon sharing its database: the expired leases, and the live-looking leases of
 * earlier processes of this daemon's home (owners starting with `home_prefix`, other than `owner`) —
 * the home lock proves those processes dead, so their items need not wait for their leases to run out.
 * Other daemons' live leases are never taken.
 */
export async function lockLeasesAtSharedStart(sql: Sql, p: { owner: string; home_prefix: string; now: number; limit: number }): Promise<WorkItemRow[]> {
  return (await sql.all(
    `SELECT * FROM llm_work_items INDEXED BY idx_work_items_leased
     WHERE status IN ('claimed', 'running')
       AND (lease_expires_at <= @now OR (substr(lease_owner, 1, length(@home_prefix)) = @home_prefix AND lease_owner <> @owner))
     ORDER BY lease_expires_at LIMIT @limit${skipLockedRows(sql.dialect)}`,
    p,
  )) as WorkItemRow[];
}

/**
 * Leased items held by a lease owner other than `owner`: at the start of a daemon whose database is its
 * own (SQLite in its home), every such owner is a previous, dead process of this daemon.
 */
export async function listLeasesNotOwnedBy(sql: Sql, owner: string): Promise<WorkItemRow[]> {
  return (await sql.all(
    `SELECT * FROM llm_work_items INDEXED BY idx_work_items_leased
     WHERE status IN ('claimed', 'running') AND lease_owner IS DISTINCT FROM ?`,
    [owner],
  )) as WorkItemRow[];
}

/** Extends a live lease (heartbeat). Returns false if the lease is no longer ours. */
export async function extendLease(sql: Sql, id: string, owner: string, leaseUntil: number): Promise<boolean> {
  return (
    (
      await sql.run(
        `UPDATE llm_work_items SET lease_expires_at = ?
       WHERE id = ? AND lease_owner = ? AND status IN ('claimed', 'running')`,
        [leaseUntil, id, owner],
      )
    ).changes === 1
  );
}

/** Takes over an expired lease (recovery), keeping the item's status. */
export async function takeOverLease(
  sql: Sql,
  p: { id: string; status: WorkItemStatus; old_owner: string | null; owner: string; lease_until: number },
): Promise<void> {
  const result = await sql.run(
    `UPDATE llm_work_items SET lease_owner = @owner, lease_expires_at = @lease_until
     WHERE id = @id AND status = @status AND lease_owner IS NOT DISTINCT FROM @old_owner`,
    p,
  );
  expectOneChange(result, `work item ${p.id} lease changed hands`);
}

/**
 * One item a recovery scan found stale, locked again for a rescue in a write of its own (the scan's batch
 * failed): only while it is unchanged since (the same owner and lease end), so still stale by the rule
 * the scan took it by; otherwise another worker or daemon has it now and it is not taken.
 */
export async function lockLeaseIfUnchanged(
  sql: Sql,
  p: { id: string; lease_owner: string | null; lease_expires_at: number | null },
): Promise<WorkItemRow | undefined> {
  return (await sql.get(
    `SELECT * FROM llm_work_items
     WHERE id = @id AND status IN ('claimed', 'running')
       AND lease_owner IS NOT DISTINCT FROM @lease_owner AND lease_expires_at IS NOT DISTINCT FROM @lease_expires_at${skipLockedRows(sql.dialect)}`,
    { id: p.id, lease_owner: p.lease_owner, lease_expires_at: p.lease_expires_at },
  )) as WorkItemRow | undefined;
}
