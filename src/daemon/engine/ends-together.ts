/**
 * A Postgres shared closure of answers (item-pipeline.ts) ends its items' threads together, after its last
 * step, in one round trip (db/thread-close.ts `endChildrenLockingParents`), instead of one round trip per
 * item while the closure holds its documents' heads: every child in id order, then every orchestration in
 * id order (engine/tx.ts LOCK ORDER 4 for several children), each orchestration's close check once, after
 * all of its children in the closure ended. Every thread move of such a closure's steps is an item's end
 * (leased.ts `releaseItemLockEndingThread`), so none of them locks a child or an orchestration before these.
 * The items' scope lock rows are deleted there too, first (LOCK ORDER 3): later than a step alone deletes
 * its row, so a row that expired and was taken over meanwhile (a stalled daemon) fails the statement, and
 * the closure's steps run alone, that item's refused.
 * A child whose status or parent changed since it was read (a cancel or an adoption committed meanwhile)
 * fails the closure (StaleStateError, from the statement): it rolls back, and each item's step runs again alone, ending its
 * thread as it does alone. A change of behaviour from ending each child in its step (main before issue 18's
 * pgbatch): there `endThread` found the canceled child, left it canceled, and its answer still applied; here
 * the canceled child's answer is not applied (recorded and paid once, its item ends `canceled`), as when the
 * cancel commits before a step alone reads it; and the closure's other answers rerun one transaction each.
 * pg-ends-together pins it.
 */
import { compareIds } from '../../core/ids.js';
import type { Sql } from '../../core/sql.js';
import type { HeldLock } from '../../db/locks.js';
import type { ThreadRow } from '../../db/schema.js';
import { type ChildEnd, endChildrenLockingParents } from '../../db/thread-close.js';
import { isTerminalThread, type ThreadStatus } from '../../domain/states.js';
import { closeParentIfDone, emitThread, type EndedStatus, type Tx } from './tx.js';

interface LaterEnd {
  thread: ThreadRow;
  to: EndedStatus;
  release: HeldLock | undefined;
}

/** The ends a closure's steps left for `endThreadsTogether`, by the closure run's statement handle (a run again starts with none). */
const later = new WeakMap<Sql, LaterEnd[]>();

/** Ends in their threads' id order (a module function: docs/design-notes.md "Closures made per call"). */
const byThreadId = (a: LaterEnd, b: LaterEnd): number => compareIds(a.thread.id, b.thread.id);

/** This closure's item ends wait for `endThreadsTogether` (`endThreadLater`). */
export function endThreadsLater(tx: Tx): void {
  later.set(tx.sql, []);
}

/** Whether the end was left for `endThreadsTogether` (`endThreadsLater` marked this closure); false: end it now. */
export function endThreadLater(tx: Tx, thread: ThreadRow, to: EndedStatus, release: HeldLock | undefined): boolean {
  const ends = later.get(tx.sql);
  if (!ends) return false;
  ends.push({ thread, to, release });
  return true;
}

/**
 * The ends left by `endThreadLater`, in one statement, then what `endThread` does after each: the ended
 * threads' events and `threadsEnded` hook (once for all that completed, once per thread for the others),
 * and each orchestration's close check, once.
 */
export async function endThreadsTogether(tx: Tx): Promise<void> {
  const ends = later.get(tx.sql);
  later.delete(tx.sql);
  if (!ends || ends.length === 0) return;
  ends.sort(byThreadId);
  const moving = ends.filter((e) => !isTerminalThread(e.thread.status));
  // A loop: docs/design-notes.md "Closures made per call".
  const parentSet = new Set<string>();
  for (const e of moving) if (e.thread.parent_thread_id !== null) parentSet.add(e.thread.parent_thread_id);
  const parentIds = [...parentSet].sort(compareIds);
  const rows: ChildEnd[] = ends.map((e) => ({
    release: e.release,
    move: isTerminalThread(e.thread.status) ? undefined : { thread: e.thread, from: e.thread.status as ThreadStatus, to: e.to },
  }));
  // A child canceled (or adopted) since the closure read it fails the statement (StaleStateError): the whole
  // closure rolls back and its answers run again alone, where the canceled one is not applied (see above).
  const parents = await endChildrenLockingParents(tx.sql, rows, parentIds, tx.now);
  const completed: ThreadRow[] = [];
  for (const e of moving) {
    const updated: ThreadRow = { ...e.thread, status: e.to, closed_at: tx.now };
    emitThread(tx, updated);
    if (e.to === 'complete') completed.push(updated);
    // Once per thread that did not complete, as `endThread` does: the app's hook then queues each run's
    // finalize for the COMMIT's query (scheduler/finalize.ts), where several such threads at once would take
    // its bulk path, a round trip while the closure holds its heads (each needs its reason read).
    else await tx.hooks.threadsEnded(tx, [updated], e.to);
  }
  // The completed ones in one call: the hook queues one finalize for all of their runs (one statement in the
  // COMMIT's query, not one per thread).
  if (completed.length > 0) await tx.hooks.threadsEnded(tx, completed, 'complete');
  for (const id of parentIds) await closeParentIfDone(tx, id, { parent: parents.get(id) });
}
