/**
 * A thread's new work item, queued inside one writer transaction (engine/tx.ts), its event emitted with
 * it: a submit's first item, or a reopened thread's next one. An orchestration's children are built with
 * `queuedWorkItem` and inserted together (services/submit.ts).
 */
import { newId } from '../../core/ids.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { insertWorkItem } from '../../db/work-items.js';
import type { TargetRef } from '../../domain/operations.js';
import type { RetryPolicy } from '../../domain/retry.js';
import { emitWorkItem, type Tx } from './tx.js';

/** What a new work item of a thread is queued with. */
export interface NewWorkItem {
  sequence: number;
  lockScope: string;
  priority: number;
  policy: RetryPolicy;
  deadlineAt: number | null;
}

/** Queues a new work item of `thread` (its first, or a retry's next sequence). */
export async function enqueueWorkItem(tx: Tx, thread: ThreadRow, p: NewWorkItem): Promise<WorkItemRow> {
  const item = queuedWorkItem(tx, thread, p);
  await insertWorkItem(tx.sql, item);
  emitWorkItem(tx, thread, item);
  return item;
}

/** The row of a new work item of `thread`, queued now (`enqueueWorkItem` inserts one; an orchestration's children are inserted together). */
export function queuedWorkItem(tx: Tx, thread: ThreadRow, p: NewWorkItem): WorkItemRow {
  return {
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
}
