import { describe, expect, it } from 'vitest';
import {
  assertThreadTransition,
  assertWorkItemTransition,
  canTransitionThread,
  canTransitionWorkItem,
  THREAD_STATUSES,
  WORK_ITEM_STATUSES,
} from '../../src/domain/states.js';
import { IllegalTransitionError } from '../../src/core/errors.js';

/** The work-item state machine, written out in full: every pair not listed here must be refused. */
const ALLOWED_WORK_ITEM: [string, string, string][] = [
  ['queued', 'claimed', 'the producer leases it'],
  ['queued', 'failed', 'canceled before it started'],
  ['queued', 'dead_letter', 'deadline passed before it started'],
  ['claimed', 'running', 'prompt recorded, call starting'],
  ['claimed', 'queued', 'lease expired before any prompt (nothing paid)'],
  ['claimed', 'failed', 'thread canceled before the call'],
  ['claimed', 'dead_letter', 'its target no longer exists'],
  ['running', 'applied', 'mutation committed'],
  ['running', 'queued', 'transient failure or repair with attempts left'],
  ['running', 'failed', 'canceled during the call'],
  ['running', 'dead_letter', 'permanent failure or attempts exhausted'],
];

const ALLOWED_THREAD: [string, string][] = [
  ['open', 'running'],
  ['open', 'complete'],
  ['open', 'failed'],
  ['open', 'canceled'],
  ['running', 'complete'],
  ['running', 'failed'],
  ['running', 'canceled'],
  ['failed', 'open'],
  ['failed', 'running'],
  ['failed', 'canceled'],
];

describe('work item transitions', () => {
  it.each(ALLOWED_WORK_ITEM)('allows %s → %s (%s)', (from, to) => {
    expect(canTransitionWorkItem(from as any, to as any)).toBe(true);
    expect(() => assertWorkItemTransition(from, to as any)).not.toThrow();
  });

  const refused = WORK_ITEM_STATUSES.flatMap((from) => WORK_ITEM_STATUSES.map((to) => [from, to] as const)).filter(
    ([from, to]) => !ALLOWED_WORK_ITEM.some(([f, t]) => f === from && t === to),
  );
  it.each(refused)('refuses %s → %s', (from, to) => {
    expect(canTransitionWorkItem(from, to)).toBe(false);
    expect(() => assertWorkItemTransition(from, to)).toThrow(IllegalTransitionError);
  });

  it('has no way out of a terminal state', () => {
    for (const terminal of ['applied', 'failed', 'dead_letter'] as const) {
      for (const to of WORK_ITEM_STATUSES) expect(canTransitionWorkItem(terminal, to)).toBe(false);
    }
  });
});

describe('thread transitions', () => {
  const refused = THREAD_STATUSES.flatMap((from) => THREAD_STATUSES.map((to) => [from, to] as const)).filter(
    ([from, to]) => !ALLOWED_THREAD.some(([f, t]) => f === from && t === to),
  );
  it.each(ALLOWED_THREAD)('allows %s → %s', (from, to) => expect(canTransitionThread(from as any, to as any)).toBe(true));
  it.each(refused)('refuses %s → %s', (from, to) => expect(() => assertThreadTransition(from, to)).toThrow(IllegalTransitionError));
});
