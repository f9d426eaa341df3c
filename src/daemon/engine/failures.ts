/**
 * A failed attempt of a leased (or queued) item, in the transaction that records it: the `error` entry,
 * then retry with backoff, dead_letter, canceled — or, at-most-once, held in doubt (`holdInDoubt`).
 */
import type { RefusedValueError } from '../../core/errors.js';
import type { ThreadRow, WorkItemRow } from '../../db/schema.js';
import { endWorkItem, requeueWorkItem } from '../../db/work-item-moves.js';
import type { ClassifiedError } from '../../domain/errors.js';
import { backoffDelayMs } from '../../domain/retry.js';
import type { WorkItemStatus } from '../../domain/states.js';
import { closeAfterError } from './charges.js';
import { leasedItemAndThread, releaseItemLock, releaseItemLockEndingThread, threadOf, type AnswerResult, type EngineContext } from './leased.js';
import { emitWorkItem, type Tx } from './tx.js';
import { appendEntry } from './ledger-append.js';

/** A failed provider call of a leased, running item: its charge closed with the call's telemetry, then `failAttempt`. */
export async function failLeasedAttempt(tx: Tx, ctx: EngineContext, itemId: string, error: ClassifiedError, latencyMs: number): Promise<AnswerResult> {
  const { item } = await leasedItemAndThread(tx, ctx, itemId, 'running');
  await closeAfterError(tx, item, error, latencyMs);
  return await failAttempt(tx, ctx, item, error);
}

/** The item step whose write storage refused: the record of a paid answer (with its call's latency), or the answer's finish. */
export type RefusedStep = { kind: 'record'; latencyMs: number } | { kind: 'finish' };

/**
 * A leased, running item whose step's write storage refused (db/errors.ts `refusedValueOf`): that write
 * would fail the same way each time it ran, so the item ends here, in a write of its own, as an apply that
 * throws does — dead-lettered (canceled if its thread was), never retried, never left running. `step`:
 * the write refused — `record`, the paid response's (the call is closed spent, `in_doubt`, as its answer is
 * not stored: nothing sends it again), or `finish`, the answer's application (the response stays recorded,
 * charged once; `replay --apply` can rescue it).
 */
export async function failRefusedWrite(tx: Tx, ctx: EngineContext, itemId: string, refused: RefusedValueError, step: RefusedStep): Promise<AnswerResult> {
  const what = step.kind === 'record' ? 'the answer could not be recorded' : 'the answer could not be applied';
  const error: ClassifiedError = { code: 'VALUE_REFUSED', class: 'permanent', message: `${what}: ${refused.message}` };
  if (step.kind === 'record') return await failLeasedAttempt(tx, ctx, itemId, error, step.latencyMs);
  const { item } = await leasedItemAndThread(tx, ctx, itemId, 'running');
  return await failAttempt(tx, ctx, item, error);
}

/**
 * A failed attempt: appends the `error` entry and decides the next state. Transient failures with
 * attempts left go back to the queue after a capped, jittered backoff (at least the provider's
 * Retry-After); the rest end the item. A canceled thread never retries.
 */
export async function failAttempt(tx: Tx, ctx: EngineContext, item: WorkItemRow, error: ClassifiedError): Promise<AnswerResult> {
  const thread = await threadOf(tx, item);
  const owner = item.status === 'queued' ? null : item.lease_owner;
  if (error.class === 'canceled' || thread.status === 'canceled') {
    const canceled: ClassifiedError =
      error.class === 'canceled' ? error : { code: 'CANCELED', class: 'canceled', message: `${error.message} (thread canceled)` };
    appendEntry(tx, thread, item.id, 'error', item.attempt, { ...errorPayload(canceled, item), next: 'canceled' });
    await giveUp(tx, thread, item, { to: 'failed', owner, code: canceled.code, message: canceled.message, threadTo: 'canceled' });
    return 'canceled';
  }
  const retryable = error.class === 'transient' || error.class === 'infra';
  if (retryable && item.attempt < item.max_attempts && item.status !== 'queued') {
    const delayMs = backoffDelayMs(ctx.operations.policyFor(thread.kind), item.attempt, ctx.random, error.retryAfterMs);
    const notBefore = tx.now + delayMs;
    appendEntry(tx, thread, item.id, 'error', item.attempt, {
      ...errorPayload(error, item),
      next: 'retry',
      delay_ms: delayMs,
      not_before: notBefore,
    });
    await requeueWorkItem(tx.sql, {
      id: item.id,
      from: item.status as 'claimed' | 'running',
      owner,
      attempt: item.attempt + 1,
      repair_count: item.repair_count,
      escalated: item.escalated,
      not_before: notBefore,
      error_code: error.code,
      error_message: error.message,
    });
    await releaseItemLock(tx, item);
    emitWorkItem(tx, thread, { ...item, status: 'queued', attempt: item.attempt + 1, not_before: notBefore, error_code: error.code });
    return 'retry';
  }
  return await deadLetter(tx, item, thread, error);
}

/**
 * At-most-once (`interrupted: hold`): a call that may have been paid is not sent again. The item ends
 * `failed`, its `error` entry says `next: "hold"` and `in_doubt: true`, and the thread fails until the
 * user decides: `combine retry` sends the call again (it may be paid twice), `combine cancel` gives up.
 */
export async function holdInDoubt(tx: Tx, item: WorkItemRow, error: ClassifiedError): Promise<AnswerResult> {
  const thread = await threadOf(tx, item);
  const message = `${error.message}; held, not sent again (interrupted: hold): \`combine retry ${thread.id}\` sends it again and may pay twice, \`combine cancel ${thread.id}\` gives it up`;
  appendEntry(tx, thread, item.id, 'error', item.attempt, { ...errorPayload(error, item), message, next: 'hold', in_doubt: true });
  await giveUp(tx, thread, item, { to: 'failed', owner: item.lease_owner, code: error.code, message, threadTo: 'failed' });
  return 'held';
}

export async function deadLetter(tx: Tx, item: WorkItemRow, thread: ThreadRow, error: ClassifiedError): Promise<AnswerResult> {
  const owner = item.status === 'queued' ? null : item.lease_owner;
  const exhausted = (error.class === 'transient' || error.class === 'infra') && item.attempt >= item.max_attempts;
  appendEntry(tx, thread, item.id, 'error', item.attempt, {
    ...errorPayload(error, item),
    next: 'dead_letter',
    ...(exhausted ? { reason: `attempts exhausted (${item.attempt} of ${item.max_attempts})` } : {}),
  });
  await giveUp(tx, thread, item, { to: 'dead_letter', owner, code: error.code, message: error.message, threadTo: 'failed' });
  return 'dead_letter';
}

/**
 * The last step of every path that gives an item up (canceled, held in doubt, dead-lettered): the item
 * ends `to` with its error (guarded by its status and lease owner), its lock is freed, its thread ends.
 */
async function giveUp(
  tx: Tx,
  thread: ThreadRow,
  item: WorkItemRow,
  p: { to: 'failed' | 'dead_letter'; owner: string | null; code: string; message: string; threadTo: 'failed' | 'canceled' },
): Promise<void> {
  await endWorkItem(tx.sql, {
    id: item.id,
    from: item.status as WorkItemStatus,
    to: p.to,
    owner: p.owner,
    error_code: p.code,
    error_message: p.message,
    now: tx.now,
  });
  emitWorkItem(tx, thread, { ...item, status: p.to, error_code: p.code });
  await releaseItemLockEndingThread(tx, item, thread, p.threadTo);
}

/** An `error` ledger entry's payload: the classified error and the item's attempt. */
export function errorPayload(error: ClassifiedError, item: WorkItemRow) {
  return {
    code: error.code,
    class: error.class,
    message: error.message,
    attempt: item.attempt,
    repair: item.repair_count,
    ...(error.httpStatus !== undefined ? { http_status: error.httpStatus } : {}),
    ...(error.retryAfterMs !== undefined ? { retry_after_ms: error.retryAfterMs } : {}),
    ...(error.providerRetryAfterMs !== undefined ? { provider_retry_after_ms: error.providerRetryAfterMs } : {}),
  };
}
