/**
 * A thread's new work item, queued inside one writer transaction (engine/tx.ts), its event emitted with
 * it: a submit's first item, or a reopened thread's next one.
 */
import { newId } from '../../core/ids.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { insertWorkItem } from '../../db/work-items.js';
import type { TargetRef } from '../../domain/operations.js';
import type { RetryPolicy } from '../../domain/retry.js';
import { emitWorkItem, type Tx } from './tx.js';

/** Queues a new work item of `thread` (its first, or a retry's next sequence). */
export async function enqueueWorkItem(
  tx: Tx,
  thread: ThreadRow,
  p: { sequence: number; lockScope: string; priority: number; policy: RetryPolicy; deadlineAt: number | null },
): Promise<WorkItemRow> {
  const item: WorkItemRow = {
    id: newId(tx.now),
    thread_id: thread.id,
    sequence: p.sequence,
    status: 'queued',
    attempt: 1,
    max_attempts: p.policy.maxAttempts,
    repair_count: 0,
    escalated: 0,
    lock_scope: p.lockScope,
    // The budget and the fair scheduler count work per project: the project of the document it changes.
    project_id: (JSON.parse(thread.target_ref) as TargetRef).project_id,
    priority: p.priority,
    not_before: tx.now,
    deadline_at: p.deadlineAt,
    lease_owner: null,
    lease_expires_at: null,
    error_code: null,
    error_message: null,
    created_at: tx.now,
    started_at: null,
    finished_at: null,
  };
  await insertWorkItem(tx.sql, item);
  emitWorkItem(tx, thread, item);
  return item;
}
