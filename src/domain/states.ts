/**
 * The state machines of ADR-035 — threads and work items — and of a call's charge, written down as
 * transition tables. Every status change in the database goes through a guarded UPDATE
 * (`WHERE id = ? AND status = ?`) whose target was first checked here and whose changed-row count is
 * checked after, so an illegal transition is a thrown error, never a silent write. The status columns
 * are also refused any other value by the database (migration 0014, CHECK triggers).
 */
import { IllegalTransitionError } from '../core/errors.js';

export const THREAD_STATUSES = ['open', 'running', 'complete', 'failed', 'canceled'] as const;
export type ThreadStatus = (typeof THREAD_STATUSES)[number];

export const WORK_ITEM_STATUSES = ['queued', 'claimed', 'running', 'applied', 'failed', 'dead_letter'] as const;
export type WorkItemStatus = (typeof WORK_ITEM_STATUSES)[number];

export const THREAD_TRANSITIONS: Record<ThreadStatus, readonly ThreadStatus[]> = {
  // open → complete/failed: an orchestration whose children all ended before any of its own work ran.
  open: ['running', 'complete', 'failed', 'canceled'],
  running: ['complete', 'failed', 'canceled'],
  // `combine retry` reopens a failed thread with a new work item; `combine cancel` gives up a failed
  // thread whose call is held in doubt (at-most-once, `interrupted: hold`).
  failed: ['open', 'running', 'canceled'],
  complete: [],
  canceled: [],
};

export const WORK_ITEM_TRANSITIONS: Record<WorkItemStatus, readonly WorkItemStatus[]> = {
  // queued → failed: canceled before it ran; queued → dead_letter: its deadline passed before it started.
  queued: ['claimed', 'failed', 'dead_letter'],
  // claimed → queued: the lease expired before any prompt was recorded (nothing was paid).
  claimed: ['running', 'queued', 'failed', 'dead_letter'],
  // running → queued: a transient failure or a repair with attempts left; running → failed: canceled,
  // or held in doubt after a crash (at-most-once).
  running: ['applied', 'queued', 'failed', 'dead_letter'],
  applied: [],
  failed: [],
  dead_letter: [],
};

/**
 * A provider call's charge (db/schema.ts, llm_charges): reserved before the call, then settled from the
 * recorded response, kept in doubt when it may have been billed, or released when it certainly was not.
 */
export const CHARGE_STATUSES = ['reserved', 'settled', 'in_doubt', 'released'] as const;
export type ChargeStatus = (typeof CHARGE_STATUSES)[number];

export const CHARGE_TRANSITIONS: Record<ChargeStatus, readonly ChargeStatus[]> = {
  // settled: the response was recorded with usage; in_doubt: recorded without usage, or failed after it
  // may have reached the provider; released: never sent, or an HTTP error answer (not billed).
  reserved: ['settled', 'in_doubt', 'released'],
  settled: [],
  in_doubt: [],
  released: [],
};

export const TERMINAL_THREAD_STATUSES: readonly ThreadStatus[] = ['complete', 'failed', 'canceled'];
export const TERMINAL_WORK_ITEM_STATUSES: readonly WorkItemStatus[] = ['applied', 'failed', 'dead_letter'];

export function canTransitionThread(from: ThreadStatus, to: ThreadStatus): boolean {
  return THREAD_TRANSITIONS[from].includes(to);
}

export function canTransitionWorkItem(from: WorkItemStatus, to: WorkItemStatus): boolean {
  return WORK_ITEM_TRANSITIONS[from].includes(to);
}

/** Throws IllegalTransitionError unless the thread transition is in the table. */
export function assertThreadTransition(from: string, to: ThreadStatus): void {
  if (!canTransitionThread(from as ThreadStatus, to)) throw new IllegalTransitionError('thread', from, to);
}

/** Throws IllegalTransitionError unless the charge transition is in the table. */
export function assertChargeTransition(from: ChargeStatus, to: ChargeStatus): void {
  if (!CHARGE_TRANSITIONS[from].includes(to)) throw new IllegalTransitionError('charge', from, to);
}

/** Throws IllegalTransitionError unless the work item transition is in the table. */
export function assertWorkItemTransition(from: string, to: WorkItemStatus): void {
  if (!canTransitionWorkItem(from as WorkItemStatus, to)) throw new IllegalTransitionError('work_item', from, to);
}

export function isTerminalThread(status: string): boolean {
  return TERMINAL_THREAD_STATUSES.includes(status as ThreadStatus);
}
