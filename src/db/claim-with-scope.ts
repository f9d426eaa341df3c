/**
 * A claim and its scope's lock, the two changes every claimed item makes (engine/producer.ts): on
 * Postgres in one statement, a round trip less per claimed item (a claim round usually claims one item:
 * slots free up one at a time), each change's count still its own in the result.
 */
import type { Sql } from '../core/sql.js';
import { acquireLockUnlessBusy, scopeFreeWithoutWaitingPg, TAKE_SCOPE } from './locks.js';
import type { WorkItemRow } from './schema.js';
import { CLAIM_TEXT, claimWorkItem } from './work-item-claims.js';

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

// The scope's insert is db/locks.ts ACQUIRE_UNLESS_BUSY_PG with the claimed row's scope and id.
const CLAIM_WITH_SCOPE_PG = `WITH claimed AS (${CLAIM_TEXT.postgres}),
  scope AS (
    INSERT INTO locks (scope, owner, acquired_at, expires_at)
    SELECT c.lock_scope, c.id, CAST(@now AS bigint), CAST(@lease_until AS bigint) FROM claimed c
    WHERE ${scopeFreeWithoutWaitingPg('c.lock_scope', 'c.id')}
    ${TAKE_SCOPE}
    RETURNING 1
  )
  SELECT c.*, (SELECT count(*) FROM scope) AS scope_taken FROM claimed c`;
