/**
 * Finalizing a scheduled run: when the thread doing a run's work ends, the run row leaves `pending` in
 * the same transaction, with the run's usage. There is no window in which the thread has ended and its
 * run still looks in flight, and usage is written once, by the UPDATE that ends the lease.
 */
import type { ScheduleRunRow } from '../../db/schema-schedules.js';
import type { ThreadRow } from '../../db/schema.js';
import {
  finalizeCompletedScheduleRunsAtCommit,
  finalizeScheduleRunOfThread,
  finalizeScheduleRunOfThreadAtCommit,
  listThreadsWithPendingRun,
} from '../../db/schedules.js';
import { countChildThreadsByStatus } from '../../db/threads.js';
import { getLatestWorkItem } from '../../db/work-items.js';
import type { Tx } from '../engine/tx.js';

type Ended = 'complete' | 'failed' | 'canceled';

/** Why a thread did not complete, in one line. */
async function failureReason(tx: Tx, thread: ThreadRow, status: Exclude<Ended, 'complete'>): Promise<string> {
  const item = await getLatestWorkItem(tx.sql, thread.id);
  if (item) return item.error_code ? `${item.error_code}: ${item.error_message ?? ''}`.trim() : `thread ${status}`;
  const children = (await countChildThreadsByStatus(tx.sql, thread.id)).map((c) => `${c.n} ${c.status}`);
  return children.length > 0 ? `thread ${status} (children: ${children.join(', ')})` : `thread ${status}`;
}

/**
 * Called for every thread that reaches a terminal status. Finalizes the runs it works for and returns
 * them (most threads belong to none).
 */
export async function finalizeRunOfThread(tx: Tx, thread: ThreadRow, status: Ended): Promise<ScheduleRunRow[]> {
  return await finalizeScheduleRunOfThread(tx.sql, await finalizeParams(tx, thread, status));
}

type FinalizeParams = Parameters<typeof finalizeScheduleRunOfThread>[1];

/** What the run's finalizing UPDATE takes: a thread that did not complete says why. */
async function finalizeParams(tx: Tx, thread: ThreadRow, status: Ended): Promise<FinalizeParams> {
  // Nothing to explain for a thread that completed (every thread of a run that went well): no read.
  const error_message = status === 'complete' ? null : await failureReason(tx, thread, status);
  return { thread_id: thread.id, to: status, now: tx.now, error_message };
}

/**
 * The `threadsEnded` hook: finalizes the runs these threads work for. One thread goes straight to its
 * finalizing UPDATE; many that completed (only a Postgres closure of answers' children) to one UPDATE of
 * all their runs, which needs no reason why (both in the COMMIT's query on Postgres); of many others (a bulk
 * cancel), only those with a run still pending are looked at, found with one query instead of two
 * statements per thread.
 */
export async function finalizeRunsOfThreads(tx: Tx, threads: readonly ThreadRow[], status: Ended): Promise<void> {
  if (threads.length === 1) {
    await finalizeRunOfThreadAtCommit(tx, threads[0]!, status);
    return;
  }
  if (status === 'complete' && tx.sql.dialect === 'postgres') {
    await finalizeCompletedScheduleRunsAtCommit(tx.sql, { thread_ids: threads.map((t) => t.id), now: tx.now });
    return;
  }
  for (const thread of await threadsWithPendingRun(tx, threads)) await finalizeRunOfThread(tx, thread, status);
}

/** `finalizeRunOfThread` with no rows back: on Postgres it rides in the COMMIT's query (db/schedules.ts). */
async function finalizeRunOfThreadAtCommit(tx: Tx, thread: ThreadRow, status: Ended): Promise<void> {
  await finalizeScheduleRunOfThreadAtCommit(tx.sql, await finalizeParams(tx, thread, status));
}

async function threadsWithPendingRun(tx: Tx, threads: readonly ThreadRow[]): Promise<ThreadRow[]> {
  const pending = new Set(
    await listThreadsWithPendingRun(
      tx.sql,
      threads.map((t) => t.id),
    ),
  );
  return threads.filter((t) => pending.has(t.id));
}
