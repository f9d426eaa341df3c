/**
 * What a thread is waiting for, for `combine thread`: a call held in doubt (at-most-once, the user must
 * decide), or a queued item held back until a time — its own backoff (at least the provider's capped
 * Retry-After) or its model's rate-limit hold after a 429.
 */
import type { Sql } from '../../core/sql.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { getLatestWorkItem } from '../../db/work-items.js';

/** A work item ended `failed` by anything but a cancel: its call was held in doubt (`interrupted: hold`). */
export function isHeldInDoubt(item: WorkItemRow | undefined): boolean {
  return item?.status === 'failed' && item.error_code !== 'CANCELED';
}

export interface InDoubtView {
  work_item_id: string;
  attempt: number;
  code: string | null;
  since: string | null;
  /** What happened and what the user can do (`combine retry` pays again, `combine cancel` gives up). */
  message: string | null;
}

export interface HoldView {
  work_item_id: string;
  /** Not claimed before this time. */
  until: string;
  /** `rate_limit` after a 429 (its model is held, or its own wait is the provider's), else `backoff`. */
  reason: 'backoff' | 'rate_limit';
  error_code: string | null;
}

const iso = (ms: number) => new Date(ms).toISOString();

export async function inDoubtOf(sql: Sql, thread: ThreadRow): Promise<InDoubtView | null> {
  if (thread.status !== 'failed') return null;
  const item = await getLatestWorkItem(sql, thread.id);
  if (!item || !isHeldInDoubt(item)) return null;
  return {
    work_item_id: item.id,
    attempt: item.attempt,
    code: item.error_code,
    since: item.finished_at === null ? null : iso(item.finished_at),
    message: item.error_message,
  };
}

/** `parkedUntil`: when the model's rate-limit hold ends (null: not held). */
export async function holdOf(sql: Sql, thread: ThreadRow, parkedUntil: number | null, now: number): Promise<HoldView | null> {
  const item = await getLatestWorkItem(sql, thread.id);
  if (item?.status !== 'queued') return null;
  const until = Math.max(item.not_before, parkedUntil ?? 0);
  if (until <= now) return null;
  const rateLimited = (parkedUntil !== null && parkedUntil > now) || item.error_code === 'PROVIDER_RATE_LIMIT';
  return { work_item_id: item.id, until: iso(until), reason: rateLimited ? 'rate_limit' : 'backoff', error_code: item.error_code };
}
