/**
 * What a committed write tells the other daemons on one Postgres (daemon/runtime/cluster-changes.ts):
 * `combine_work` when work may have become claimable (`queued`: an item was queued; `freed`: items only
 * left the running states), `combine_events` per thread whose ledger or status
 * changed, `combine_cancel` with the threads it canceled, and nothing for a write that only leased work
 * (NOTIFY serializes the commits that send one).
 */
import { describe, expect, it } from 'vitest';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { notificationsOf } from '../../src/daemon/runtime/cluster-changes.js';

const base = { parent_thread_id: null, trace_id: null };
const item = (thread: string, status: string): EngineEvent => ({
  ...base,
  type: 'work_item',
  thread_id: thread,
  work_item_id: `w-${thread}`,
  status,
  attempt: 1,
  error_code: null,
  not_before: null,
});
const thread = (id: string, status: string, parent: string | null = null): EngineEvent => ({
  ...base,
  parent_thread_id: parent,
  type: 'thread',
  thread_id: id,
  status,
  kind: 'k',
  target_ref: { doc_type: 'd', project_id: 'p' },
});
const ledger = (id: string, seq: number): EngineEvent => ({
  ...base,
  type: 'ledger',
  thread_id: id,
  work_item_id: null,
  seq,
  entry_type: 'response',
  attempt: 1,
  code: null,
  next: null,
  summary: '',
});

describe('notifications of a write', () => {
  it('a submit wakes every producer and names its thread', () => {
    expect(notificationsOf([thread('t1', 'open'), item('t1', 'queued')])).toEqual([
      { channel: 'combine_work', payload: 'queued' },
      { channel: 'combine_events', payload: 't1:0:' },
    ]);
  });

  it('a claim alone notifies nobody; an answer names its thread once, with the parent', () => {
    expect(notificationsOf([item('t1', 'claimed'), item('t2', 'running')])).toEqual([]);
    expect(notificationsOf([ledger('c1', 7), ledger('c1', 9), thread('c1', 'complete', 'p1'), item('c1', 'applied')])).toEqual([
      { channel: 'combine_work', payload: 'freed' },
      { channel: 'combine_events', payload: 'c1:0:p1' },
    ]);
  });

  it('a write that ends one item and queues another says it queued work (a daemon with an empty queue must look)', () => {
    expect(notificationsOf([item('c1', 'applied'), item('c2', 'queued')]).filter((n) => n.channel === 'combine_work')).toEqual([
      { channel: 'combine_work', payload: 'queued' },
    ]);
    expect(notificationsOf([item('c1', 'failed'), item('c1', 'queued')]).filter((n) => n.channel === 'combine_work')).toEqual([
      { channel: 'combine_work', payload: 'queued' },
    ]);
  });

  it('a write touching many threads sends one `*` instead of one per thread', () => {
    const many = Array.from({ length: 100 }, (_, i) => thread(`c${i}`, 'open', 'p1'));
    expect(notificationsOf(many)).toEqual([{ channel: 'combine_events', payload: '*' }]);
  });

  it('a cancel names the threads it canceled, in payloads Postgres accepts however many there are', () => {
    expect(notificationsOf([thread('c1', 'canceled', 'p1'), thread('p1', 'canceled'), thread('c2', 'complete', 'p1')])).toContainEqual({
      channel: 'combine_cancel',
      payload: 'c1,p1',
    });
    const ids = Array.from({ length: 10_000 }, (_, i) => `thread-with-a-long-id-${String(i).padStart(6, '0')}`);
    const notes = notificationsOf(ids.map((id) => thread(id, 'canceled', 'p1'))).filter((n) => n.channel === 'combine_cancel');
    expect(notes.length).toBeGreaterThan(1);
    for (const n of notes) expect(Buffer.byteLength(n.payload)).toBeLessThan(8000);
    expect(notes.flatMap((n) => n.payload.split(','))).toEqual(ids);
  });
});
