/**
 * Several items' steps in one Postgres transaction (engine/shared-writes.ts; issue 18 target 9): a shared
 * closure of starts or records holds several of one daemon's items, their threads and budget locks at
 * once, where a step alone held one of each. Every other write that takes several of them must take them
 * in the same order (engine/tx.ts LOCK ORDER), or the two wait for each other: the heartbeat extending
 * the daemon's leases (items in id order), a cancel ending an orchestration's children (threads in id
 * order). Each case pins, with gates on `pg_stat_activity` and no timing, the interleaving in which the
 * other order deadlocked: a third transaction holds the first row both want, the shared closure queues
 * for it first, then the other write; once the third commits, the closure takes that row and goes on to
 * the next. Each writer makes one attempt, so a deadlock is a failed write, and every failed write is
 * counted (a failed shared closure's steps would otherwise run again alone and hide it). Two more pairs:
 * two daemons' closures over children of two open orchestrations, and a closure against a start alone
 * answered from the cache in a budgeted project. Real Postgres, the real shared closures (`itemWrites`)
 * and the real heartbeat and cancel.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { insertProject } from '../../src/db/projects.js';
import { getThread, insertThread, lockThread } from '../../src/db/threads.js';
import { rememberCachedAnswer } from '../../src/db/response-cache.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { lockWorkItemWithThread } from '../../src/db/item-with-thread.js';
import { itemWrites } from '../../src/daemon/engine/item-pipeline.js';
import { recordResponse } from '../../src/daemon/engine/completer.js';
import { startWorkItems } from '../../src/daemon/engine/starts.js';
import type { EngineContext } from '../../src/daemon/engine/leased.js';
import type { BuiltRequest } from '../../src/daemon/engine/request.js';
import { extendLeases } from '../../src/daemon/engine/rescuer.js';
import { cancelThreads, type Tx, type Write } from '../../src/daemon/engine/tx.js';
import type { OperationRegistry } from '../../src/operations/registry.js';
import { holderThenTwoWrites, oneAttemptWrite, openRaceDatabase, PAID_ANSWER, type RaceDatabase, testEngineContext } from '../helpers/pg-race.js';
import type { PgSql } from '../../src/db/pg/sql.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
/** Every write's failure, also a shared closure's that SharedWrites then hides by running each step alone. */
let failed: string[] = [];
/** The writer: one attempt per write (a deadlock is a failed write); `budgeted` says every project has a budget. */
let writer: Write;
beforeEach(async () => {
  db = await openRaceDatabase();
  writer = db.write;
  failed = [];
  await insertProject(db.reader, { id: 'p', name: 'p', created_at: 1 });
});
afterEach(() => db?.drop());
const reader = (): PgSql => db.reader;
const write: Write = (fn) =>
  writer(fn).catch((err: unknown) => {
    failed.push(String((err as { cause?: unknown }).cause ?? err));
    throw err;
  });

/** Daemon `owner`'s engine context: every call goes to one route; nothing else is looked up. */
const ctxOf = (owner: string, cache = false): EngineContext => testEngineContext(owner, {} as OperationRegistry, cache);
const ctx = ctxOf('d1');

const claimed: BuiltRequest = {
  ok: true,
  request: { model: 'test-model', messages: [{ role: 'user', content: 'x' }], temperature: 0, max_tokens: 10 },
  model: 'test-model',
  escalated: false,
};

/** Items `ids` of threads `t-<id>` under `owner` (lease live), in `status`; inserted in the order given. */
async function leasedItems(
  ids: readonly string[],
  status: 'claimed' | 'running',
  thread: { status: 'open' | 'running'; parent?: string },
  owner = 'd1',
): Promise<void> {
  for (const id of ids) {
    await insertThread(reader(), { ...testThreadRow(id), status: thread.status, parent_thread_id: thread.parent ?? null });
    await insertWorkItem(reader(), testWorkItemRow(id, { status, lease_owner: owner, lease_expires_at: Date.now() + 60_000 }));
  }
}

/** `holderThenTwoWrites` on this test's writer and reader; no write failed, not even a shared closure whose steps then ran again alone (and committed). */
async function sharedThenOther(holder: (tx: Tx) => Promise<unknown>, shared: () => Promise<unknown>, other: () => Promise<unknown>): Promise<void> {
  await holderThenTwoWrites(write, reader(), holder, shared, other);
  expect(failed).toEqual([]);
}

describe("a shared closure of one daemon's records and its heartbeat", () => {
  it('both lock the items in id order: the heartbeat waits for the closure, both commit', async () => {
    await leasedItems(['i1', 'i2'], 'running', { status: 'running' });
    const records = itemWrites(write, ctx, 'postgres');
    const heldInClaimOrder = ['i2', 'i1'].map((id) => ({ id, lockScope: `p:${id}` }));
    await sharedThenOther(
      (tx) => lockWorkItemWithThread(tx.sql, 'i1'),
      // Asked in one turn: one closure, which locks i1 and i2 in one statement (it waits at i1).
      () => Promise.all(['i1', 'i2'].map((itemId) => records.record({ itemId, outcome: PAID_ANSWER }))),
      // The heartbeat's items in the daemon's order (i2 claimed first): it took i2, then waited for i1,
      // which the closure took next, before going on to i2.
      () => write((tx) => extendLeases(tx, 'd1', heldInClaimOrder, tx.now + 60_000)),
    );
    const responses = await reader().all<{ work_item_id: string }>("SELECT work_item_id FROM llm_ledger_entries WHERE entry_type = 'response' ORDER BY seq");
    expect(responses.map((r) => r.work_item_id).sort()).toEqual(['i1', 'i2']);
  });
});

describe("a shared closure of an orchestration's starts and its cancel", () => {
  it("both lock the children's threads in id order: the cancel waits for the closure, both commit", async () => {
    await insertThread(reader(), { ...testThreadRow('o'), role: 'orchestration', status: 'running' });
    // t-b inserted before t-a: a cancel that locks threads in the order it finds them takes t-b first.
    await leasedItems(['b', 'a'], 'claimed', { status: 'open', parent: 't-o' });
    const starts = itemWrites(write, ctx, 'postgres');
    await sharedThenOther(
      (tx) => lockThread(tx.sql, 't-a'),
      // One closure: items a and b locked, then a's start (t-a, the first thread id) waits for the holder.
      () => Promise.all(['b', 'a'].map((itemId) => starts.start({ itemId, claimed }))),
      () => write((tx) => cancelThreads(tx, ['t-b', 't-a'])),
    );
    // The starts committed first (prompt entries, items running); the cancel then ended both threads.
    expect([(await getWorkItem(reader(), 'a'))?.status, (await getWorkItem(reader(), 'b'))?.status]).toEqual(['running', 'running']);
    expect([(await getThread(reader(), 't-a'))?.status, (await getThread(reader(), 't-b'))?.status]).toEqual(['canceled', 'canceled']);
  });
});

describe('two daemons starting children of two open orchestrations', () => {
  it('each closure takes the parents in id order, after its children: both commit', async () => {
    for (const o of ['x', 'y']) await insertThread(reader(), { ...testThreadRow(o), role: 'orchestration', status: 'open' });
    // Child ids interleave across the orchestrations (two generate-alls created at once): in child id
    // order, d1's closure [a of x, d of y] took t-x then t-y, d2's [b of y, c of x] t-y then t-x.
    await leasedItems(['a'], 'claimed', { status: 'open', parent: 't-x' }, 'd1');
    await leasedItems(['d'], 'claimed', { status: 'open', parent: 't-y' }, 'd1');
    await leasedItems(['b'], 'claimed', { status: 'open', parent: 't-y' }, 'd2');
    await leasedItems(['c'], 'claimed', { status: 'open', parent: 't-x' }, 'd2');
    const d1 = itemWrites(write, ctxOf('d1'), 'postgres');
    const d2 = itemWrites(write, ctxOf('d2'), 'postgres');
    await sharedThenOther(
      (tx) => lockThread(tx.sql, 't-x'),
      // d1's closure: its children t-a and t-d, then t-x, where it waits (t-y comes after).
      () => Promise.all(['a', 'd'].map((itemId) => d1.start({ itemId, claimed }))),
      // d2's closure: t-b and t-c, then t-x too, which d1 takes first. In child id order, b's start took
      // t-y first, and d1 then waited for it while holding t-x.
      () => Promise.all(['b', 'c'].map((itemId) => d2.start({ itemId, claimed }))),
    );
    const prompts = await reader().all<{ work_item_id: string }>("SELECT work_item_id FROM llm_ledger_entries WHERE entry_type = 'prompt'");
    expect(prompts.map((r) => r.work_item_id).sort()).toEqual(['a', 'b', 'c', 'd']);
  });
});

describe("a shared start closure in a budgeted project and another daemon's start answered from the cache", () => {
  it('the cached start gives its reservation back before it moves its threads: both commit', async () => {
    writer = oneAttemptWrite(db.pool, { threadsEnded: async () => {}, budgeted: () => true });
    // The cache: s's answer to the same request, recorded and indexed.
    await leasedItems(['s'], 'claimed', { status: 'open' }, 'd0');
    const seed = ctxOf('d0');
    const [started] = await write((tx) => startWorkItems(tx, seed, [{ itemId: 's', claimed }]));
    if (started?.kind !== 'call') throw new Error('the seed item was not started');
    await write((tx) => recordResponse(tx, seed, 's', PAID_ANSWER));
    const response = await reader().get<{ seq: number }>("SELECT seq FROM llm_ledger_entries WHERE work_item_id = 's' AND entry_type = 'response'");
    await rememberCachedAnswer(reader(), {
      request_hash: started.requestHash!,
      prompt_seq: started.prompt.row.seq,
      response_seq: response!.seq,
      created_at: 1,
    });

    await insertThread(reader(), { ...testThreadRow('o'), role: 'orchestration', status: 'open' });
    await leasedItems(['a'], 'claimed', { status: 'open' }, 'd1');
    await leasedItems(['b'], 'claimed', { status: 'open', parent: 't-o' }, 'd1');
    await leasedItems(['x'], 'claimed', { status: 'open', parent: 't-o' }, 'd2');
    const d1 = itemWrites(write, ctxOf('d1'), 'postgres');
    const d2 = itemWrites(write, ctxOf('d2', true), 'postgres');
    let alone: Promise<unknown> = Promise.resolve();
    await sharedThenOther(
      (tx) => lockThread(tx.sql, 't-a'),
      // d1's closure [a, b] takes budget:p before any thread, then waits for t-a.
      () => Promise.all(['a', 'b'].map((itemId) => d1.start({ itemId, claimed }))),
      // x's start alone, a cache hit: it waits for budget:p. Had it moved t-x and t-o first, b's start
      // would then wait for t-o.
      () => (alone = d2.start({ itemId: 'x', claimed })),
    );
    expect(((await alone) as { kind: string } | null)?.kind).toBe('recorded');
  });
});

describe('a record run again after it committed (its COMMIT reported as failed: the connection broke during it)', () => {
  it('returns the response as recorded and appends no second one', async () => {
    await leasedItems(['r'], 'running', { status: 'running' });
    const first = await write((tx) => recordResponse(tx, ctx, 'r', PAID_ANSWER));
    const again = await write((tx) => recordResponse(tx, ctx, 'r', PAID_ANSWER));
    expect(again.row.seq).toBe(first.row.seq);
    const responses = await reader().all<{ seq: number }>("SELECT seq FROM llm_ledger_entries WHERE work_item_id = 'r' AND entry_type = 'response'");
    expect(responses).toHaveLength(1);
  });
});
