/**
 * The producer: leases up to the number of free slots in one transaction. Each claim is one guarded
 * UPDATE plus the item's lock scope, so an item is never leased twice and two mutations of one epic
 * never run at the same time.
 */
import { acquireLock } from '../../db/locks.js';
import type { WorkItemRow } from '../../db/schema.js';
import { getThread } from '../../db/threads.js';
import { claimNextWorkItem, listQueuedPastDeadline } from '../../db/work-items.js';
import { failAttempt, type CompleterContext } from './completer.js';
import { emitWorkItem, type Tx } from './tx.js';

export function claimWorkItems(tx: Tx, owner: string, limit: number, leaseMs: number): WorkItemRow[] {
  const claimed: WorkItemRow[] = [];
  const leaseUntil = tx.now + leaseMs;
  while (claimed.length < limit) {
    const item = claimNextWorkItem(tx.db, { owner, now: tx.now, lease_until: leaseUntil });
    if (!item) break;
    // The claim query skipped held scopes, so this cannot fail unless the table is inconsistent.
    if (!acquireLock(tx.db, { scope: item.lock_scope, owner: item.id, now: tx.now, expires_at: leaseUntil })) {
      throw new Error(`lock ${item.lock_scope} is held although the claim found it free`);
    }
    const thread = getThread(tx.db, item.thread_id);
    if (thread) emitWorkItem(tx, thread, item);
    claimed.push(item);
  }
  return claimed;
}

/** Ends queued items whose deadline passed before they could start (SKIPPED_DEADLINE). */
export function skipItemsPastDeadline(tx: Tx, ctx: CompleterContext, limit = 500): number {
  const late = listQueuedPastDeadline(tx.db, tx.now, limit);
  for (const item of late) {
    failAttempt(tx, ctx, item, {
      code: 'SKIPPED_DEADLINE',
      class: 'permanent',
      message: `the deadline passed at ${new Date(item.deadline_at!).toISOString()} before the work started`,
    });
  }
  return late.length;
}
