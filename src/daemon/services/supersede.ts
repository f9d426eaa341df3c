/**
 * Supersede (ADR-002 §6-1, §10): a `--force` request for a target whose previous request has not
 * started — its work item is still `queued`, never leased, so nothing is being paid for — replaces it
 * instead of waiting behind it. The old item ends `failed` with SUPERSEDED (an `error` entry names the
 * thread that replaced it), the old thread ends `canceled`, and only the new request makes a call: a
 * burst of forced requests for one target costs at most the calls already in flight plus one.
 */
import type { ThreadRow } from '../../db/schema.js';
import { getLatestWorkItem } from '../../db/work-items.js';
import { endWorkItem } from '../../db/work-item-moves.js';
import { emitWorkItem, moveThread, type Tx } from '../engine/tx.js';
import { appendEntry } from '../engine/ledger-append.js';

/** The queued item of a thread a forced request may replace: a top-level work thread whose call has not started. */
export async function supersedableItem(tx: Tx, thread: ThreadRow) {
  if (thread.role !== 'work' || thread.parent_thread_id !== null) return null;
  const item = await getLatestWorkItem(tx.sql, thread.id);
  return item?.status === 'queued' ? item : null;
}

/** Ends `thread` (whose latest item is queued) as replaced by the request that becomes `byThreadId`. */
export async function supersedeThread(tx: Tx, thread: ThreadRow, byThreadId: string): Promise<void> {
  const item = await supersedableItem(tx, thread);
  if (!item) throw new Error(`thread ${thread.id} has no queued work item to supersede`);
  const message = `superseded by thread ${byThreadId} (a --force request for the same target) before its call started; nothing was paid for it`;
  appendEntry(tx, thread, item.id, 'error', item.attempt, {
    code: 'SUPERSEDED',
    class: 'canceled',
    message,
    attempt: item.attempt,
    repair: item.repair_count,
    next: 'canceled',
    superseded_by: byThreadId,
  });
  await endWorkItem(tx.sql, { id: item.id, from: 'queued', to: 'failed', owner: null, error_code: 'SUPERSEDED', error_message: message, now: tx.now });
  emitWorkItem(tx, thread, { ...item, status: 'failed', error_code: 'SUPERSEDED' });
  await moveThread(tx, thread, 'canceled');
}
