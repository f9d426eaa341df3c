/**
 * The rescuer: the recovery scan, run at start and periodically. It finds work whose lease expired
 * (its worker died or stalled) and continues it from what the ledger proves happened:
 *
 *   claimed, no prompt           nothing was sent or paid: back to the queue, same attempt
 *   running, last entry response the answer was paid for and recorded: resume at validation, no new call
 *   running, last entry prompt   the call was in flight: `INTERRUPTED` (it may have been paid); retried by
 *                                policy, or with `interrupted: hold` not sent again (the item ends failed)
 *
 * It also releases locks whose owner is gone and closes orchestrations whose children have all ended.
 */
import { getLastLedgerEntryForWorkItem } from '../../ledger/store.js';
import { compareIds } from '../../core/ids.js';
import { acquireLockUnlessBusy, extendLock, releaseOrphanedLocks } from '../../db/locks.js';
import { tryLockKeyForTransaction } from '../../db/key-locks.js';
import type { LedgerRow, WorkItemRow } from '../../db/schema.js';
import { getThread, listParentsWithAllChildrenTerminal } from '../../db/threads.js';
import { extendLease, listLeasesNotOwnedBy, lockExpiredLeases, lockLeasesAtSharedStart, takeOverLease } from '../../db/leases.js';
import { getWorkItem } from '../../db/work-items.js';
import { requeueWorkItem } from '../../db/work-item-moves.js';
import { closeAfterError, lockProjectBudget, releaseUnsent } from './charges.js';
import { failAttempt, holdInDoubt } from './failures.js';
import type { EngineContext } from './leased.js';
import type { ClassifiedError } from '../../domain/errors.js';
import { closeParentIfDone, emitWorkItem, type Tx } from './tx.js';

/** Expired leases one recovery transaction takes on a shared database; a full batch scans again at once. */
export const RESCUE_BATCH = 100;

/**
 * The leases the recovery scan takes, read (and on Postgres locked) in its transaction. At start of a
 * daemon alone on its database, every lease held by another owner: that owner is a previous, dead
 * process. On a shared database, only expired leases — a live daemon's heartbeats keep its own fresh
 * — plus, at start, those of earlier processes of this home (the home lock proves them dead). Later
 * scans pass over this daemon's own items in flight (a stalled heartbeat is not a dead worker).
 */
export async function lockStaleLeases(
  tx: Tx,
  scan: { startup: boolean; exclusive: boolean; owner: string; homePrefix: string; inFlight: ReadonlyMap<string, unknown> },
): Promise<WorkItemRow[]> {
  if (scan.startup && scan.exclusive) return listLeasesNotOwnedBy(tx.sql, scan.owner);
  if (scan.startup) return lockLeasesAtSharedStart(tx.sql, { owner: scan.owner, home_prefix: scan.homePrefix, now: tx.now, limit: RESCUE_BATCH });
  return (await lockExpiredLeases(tx.sql, tx.now, RESCUE_BATCH)).filter((i) => !scan.inFlight.has(i.id));
}

export interface RescueResult {
  /** Items whose recorded response must be validated and applied (now leased by us). */
  resume: { itemId: string; response: LedgerRow }[];
  requeued: number;
  interrupted: number;
  /** Of the interrupted: held in doubt (at-most-once), not retried. */
  held: number;
  /** Left for a later scan: another item holds their lock's scope. */
  deferred: number;
}

export async function rescueLeases(tx: Tx, ctx: EngineContext, items: WorkItemRow[], leaseMs: number): Promise<RescueResult> {
  const result: RescueResult = { resume: [], requeued: 0, interrupted: 0, held: 0, deferred: 0 };
  // Every budget lock the batch needs before its first ledger append (an INTERRUPTED entry below), in
  // sorted order: the chain head stays the last shared lock, and two daemons' batches cannot cross.
  for (const projectId of [...new Set(items.map((i) => i.project_id))].sort()) await lockProjectBudget(tx, projectId);
  // Read in this transaction (and on Postgres locked by it): no other writer changes them meanwhile.
  for (const item of items) {
    const thread = await getThread(tx.sql, item.thread_id);
    if (!thread) continue;
    if (item.status === 'claimed') {
      // No prompt was recorded, so no call was made: the reservation goes back to the budget.
      await releaseUnsent(tx, item);
      await requeueWorkItem(tx.sql, {
        id: item.id,
        from: 'claimed',
        owner: item.lease_owner,
        attempt: item.attempt,
        repair_count: item.repair_count,
        escalated: item.escalated,
        not_before: tx.now,
        error_code: item.error_code,
        error_message: item.error_message,
      });
      emitWorkItem(tx, thread, { ...item, status: 'queued', not_before: tx.now });
      result.requeued++;
      continue;
    }
    const leaseUntil = tx.now + leaseMs;
    // The item's lock expired with its lease: take it back (it is still the item's, expired, or free).
    // While another item holds the scope (or another daemon's claim is taking it), this one waits for a later scan.
    if (!(await acquireLockUnlessBusy(tx.sql, { scope: item.lock_scope, owner: item.id, now: tx.now, expires_at: leaseUntil }))) {
      result.deferred++;
      continue;
    }
    await takeOverLease(tx.sql, { id: item.id, status: 'running', old_owner: item.lease_owner, owner: ctx.owner, lease_until: leaseUntil });
    const mine = { ...item, lease_owner: ctx.owner, lease_expires_at: leaseUntil };
    const last = await getLastLedgerEntryForWorkItem(tx.sql, item.id);
    if (last?.entry_type === 'response') {
      result.resume.push({ itemId: item.id, response: last });
    } else {
      // The call was in flight: it may have been billed, so its reservation counts as spent.
      const error: ClassifiedError = {
        code: 'INTERRUPTED',
        class: 'transient',
        message: 'the daemon stopped while the call was in flight; the provider may have been paid for it',
      };
      await closeAfterError(tx, mine, error, null);
      // At-most-once operations do not send it again: the user decides (retry or cancel).
      if (ctx.operations.policyFor(thread.kind).interrupted === 'hold') {
        await holdInDoubt(tx, mine, error);
        result.held++;
      } else await failAttempt(tx, ctx, mine, error);
      result.interrupted++;
    }
  }
  return result;
}

/**
 * Releases orphaned locks and closes parents whose children have all ended. Once at a time across
 * daemons sharing a database: a daemon finding another's sweep in progress skips its own (the other
 * does the same work; two would only wait on each other's rows).
 */
export async function sweepLocksAndParents(tx: Tx): Promise<{ locksReleased: string[]; parentsClosed: number }> {
  if (!(await tryLockKeyForTransaction(tx.sql, 'combine.sweep'))) return { locksReleased: [], parentsClosed: 0 };
  const locksReleased = await releaseOrphanedLocks(tx.sql);
  const parents = await listParentsWithAllChildrenTerminal(tx.sql);
  for (const p of parents) await closeParentIfDone(tx, p.id);
  return { locksReleased, parentsClosed: parents.length };
}

/**
 * The heartbeat: extends the leases and locks of items in flight here. Returns the items whose lease
 * another owner took, or whose lock another item holds (the completer then refuses to end them).
 * LOCK ORDER (engine/tx.ts): every item first, then their scope rows. A scope row extended before the
 * next item's lock was a cycle: a claim round holding a budget lock waited for that (expired) row, the
 * heartbeat for the next item, whose step held it and waited for the budget lock.
 */
export async function extendLeases(tx: Tx, owner: string, items: { id: string; lockScope: string }[], until: number): Promise<string[]> {
  const lost: string[] = [];
  const leased: { id: string; lockScope: string }[] = [];
  // In id order: a shared closure of this daemon's item steps locks its items in id order too
  // (db/item-with-thread.ts `lockWorkItemsWithThreads`); in another order the two could each wait for the other.
  for (const item of [...items].sort((a, b) => compareIds(a.id, b.id))) {
    if (await extendLease(tx.sql, item.id, owner, until)) leased.push(item);
    else if ((await getWorkItem(tx.sql, item.id))?.lease_owner !== owner) lost.push(item.id);
  }
  for (const { id, lockScope } of leased) {
    // A lock that expired anyway (a stalled process) is taken back unless another item holds it now
    // or another daemon's claim is taking it (then lost: not waited for, as claims do not wait).
    const locked =
      (await extendLock(tx.sql, { scope: lockScope, owner: id, now: tx.now, expires_at: until })) ||
      (await acquireLockUnlessBusy(tx.sql, { scope: lockScope, owner: id, now: tx.now, expires_at: until }));
    if (!locked) lost.push(id);
  }
  return lost;
}
