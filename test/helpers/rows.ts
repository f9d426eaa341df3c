/** Minimal stored rows for tests that insert threads and work items directly (no operation, no daemon). */
import type { ThreadRow, WorkItemRow } from '../../src/db/schema.js';

/** An open work thread of project `p` with idempotency key `key`, id `t-<key>`. */
export function testThreadRow(key: string): ThreadRow {
  return {
    id: `t-${key}`,
    kind: 'k',
    space_type: 'project',
    space_id: 'p',
    target_ref: '{}',
    status: 'open',
    parent_thread_id: null,
    idempotency_key: key,
    role: 'work',
    input: '{}',
    created_by: null,
    traceparent: null,
    created_at: 1,
    closed_at: null,
  };
}

/** Work item `id` of thread `t-<id>` (testThreadRow), queued and due unless `over` says otherwise. */
export function testWorkItemRow(id: string, over: Partial<WorkItemRow> = {}): WorkItemRow {
  return {
    id,
    thread_id: `t-${id}`,
    sequence: 1,
    status: 'queued',
    attempt: 1,
    max_attempts: 3,
    repair_count: 0,
    escalated: 0,
    lock_scope: `p:${id}`,
    project_id: 'p',
    priority: 0,
    not_before: 0,
    deadline_at: null,
    lease_owner: null,
    lease_expires_at: null,
    error_code: null,
    error_message: null,
    created_at: 1,
    started_at: null,
    finished_at: null,
    ...over,
  };
}
