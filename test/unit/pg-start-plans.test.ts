/**
 * A start's two statements on Postgres under the plan a connection keeps for them: `startThreadsInLockOrder`
 * and `markWorkItemsRunning` are prepared once per connection, and after five executions the connection
 * keeps one generic plan (db/dialect.ts `inJsonArrayInitPlanPg`, `statusTestNoPartialIndex`). The other tests
 * of these statements run each a few times per connection, with custom plans; here one connection runs them
 * until it keeps the generic plan, on a table of ~1,000 ended rows with statistics gathered while no thread
 * was active and no item leased (the statistics under which a generic plan of a status test took a partial
 * index of those rows), and each then still locks and moves exactly what it did: children before
 * orchestrations, each group in id order; every item or none. And on a table of a few rows (read by a
 * sequential scan), a start that moves nothing still locks every thread it names.
 */
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { getThread, insertThread, startThreadsInLockOrder } from '../../src/db/threads.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { markWorkItemsRunning } from '../../src/db/work-item-moves.js';
import { waitUntil } from '../helpers/harness.js';
import { preparedPlansOf } from '../helpers/pg-prepared-plans.js';
import { aWriteWaitsForALock } from '../helpers/pg-race.js';
import { createTestDatabase, openTestPool, type TestDatabase } from '../helpers/postgres.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let database: TestDatabase;
/** One connection: every statement of the starts runs on it, so its prepared statements reach their generic plans. */
let onePool: pg.Pool;
let starter: PgSql;
let writer: PgWriter<never>;
/** Other connections: the rows held, the checks. */
let pool: pg.Pool;
let reader: PgSql;

beforeEach(async () => {
  database = await createTestDatabase({ migrated: true });
  onePool = openTestPool(database.url, 1);
  starter = new PgSql(onePool);
  writer = new PgWriter<never>(onePool, { conflictAttempts: 1 });
  pool = openTestPool(database.url, 3);
  reader = new PgSql(pool);
});
afterEach(async () => {
  await writer?.close();
  await onePool?.end();
  await pool?.end();
  await database?.drop();
});

/**
 * ~1,000 rows, all ended (tables of many pages: every look-up by key is an index scan), then ANALYZE, so
 * the statistics say no thread is active and no item is leased.
 */
async function endedRows(): Promise<void> {
  for (let i = 0; i < 1000; i++) {
    const key = `done${String(i).padStart(4, '0')}`;
    await insertThread(reader, { ...testThreadRow(key), status: 'complete' });
    await insertWorkItem(reader, testWorkItemRow(key, { status: 'applied' }));
  }
  await reader.run('ANALYZE llm_threads');
  await reader.run('ANALYZE llm_work_items');
}

/** Which of `ids` no transaction holds locked, read from another connection. */
async function unlocked(ids: readonly string[]): Promise<string[]> {
  const list = ids.map(() => '?').join(', ');
  const rows = await reader.all<{ id: string }>(`SELECT id FROM llm_threads WHERE id IN (${list}) ORDER BY id FOR NO KEY UPDATE SKIP LOCKED`, ids);
  return rows.map((r) => r.id);
}

/** The plans of the starter connection's prepared statement whose text has `marker`, and its generic plan. */
const planOf = (marker: string) => preparedPlansOf(starter, marker);

const PARTIAL_INDEXES =
  /idx_threads_active|uq_threads_idempotency_active|idx_threads_ended_badly|idx_work_items_leased|idx_work_items_claimable|idx_work_items_fair/;

describe("a start's threads under the connection's generic plan", () => {
  it('locks the children first, then the orchestrations, each in id order, and moves exactly the open ones', async () => {
    await endedRows();
    await insertThread(reader, { ...testThreadRow('y'), role: 'orchestration', status: 'open' });
    // Six starts of one child each: the connection's first five plans are custom, then it keeps the generic one.
    for (let i = 0; i < 6; i++) {
      const id = `t-w${i}`;
      await insertThread(reader, { ...testThreadRow(`w${i}`), parent_thread_id: 't-y' });
      const moved = await startThreadsInLockOrder(starter, { children: [id], start: [id], startParents: ['t-y'], closeParents: [] });
      // The orchestration starts with its first child only.
      expect(moved.map((t) => t.id).sort()).toEqual(i === 0 ? [id, 't-y'] : [id]);
    }
    const plans = await planOf("UPDATE llm_threads SET status = 'running'");
    expect(plans.generic).toBeGreaterThan(0);
    expect(plans.plan).toContain('llm_threads_pkey');
    expect(plans.plan).not.toMatch(/Seq Scan on llm_threads/);
    expect(plans.plan).not.toMatch(PARTIAL_INDEXES);

    // Ids interleaved, so that id order alone would take an orchestration between two children:
    // orchestrations t-b (open) and t-d (running); children t-a (of t-b) and t-c (of t-d) to start, t-e
    // (of t-d) failing: locked, not moved, and its orchestration t-d locked (it may close it).
    await insertThread(reader, { ...testThreadRow('b'), role: 'orchestration', status: 'open' });
    await insertThread(reader, { ...testThreadRow('d'), role: 'orchestration', status: 'running' });
    await insertThread(reader, { ...testThreadRow('a'), parent_thread_id: 't-b' });
    await insertThread(reader, { ...testThreadRow('c'), parent_thread_id: 't-d' });
    await insertThread(reader, { ...testThreadRow('e'), parent_thread_id: 't-d' });
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM llm_threads WHERE id = 't-b' FOR NO KEY UPDATE");
      const start = startThreadsInLockOrder(starter, {
        children: ['t-e', 't-c', 't-a'],
        start: ['t-c', 't-a'],
        startParents: ['t-d', 't-b'],
        closeParents: ['t-d'],
      });
      await waitUntil(() => aWriteWaitsForALock(reader), 'the start to wait for t-b');
      // Waiting for t-b: it holds every child (t-e too, after t-b in id order), and not yet t-d.
      expect(await unlocked(['t-a', 't-c', 't-d', 't-e'])).toEqual(['t-d']);
      await holder.query('COMMIT');
      const moved = await start;
      expect(moved.map((t) => [t.id, t.status]).sort()).toEqual([
        ['t-a', 'running'],
        ['t-b', 'running'],
        ['t-c', 'running'],
      ]);
    } finally {
      holder.release();
    }
    expect((await getThread(reader, 't-e'))?.status).toBe('open');
    // No custom plan since: that start ran the generic one.
    expect((await planOf("UPDATE llm_threads SET status = 'running'")).custom).toBe(plans.custom);
  });
});

describe("a start's threads on a table of a few rows", () => {
  it('locks every thread it names while it moves none (the children it fails and their orchestration)', async () => {
    await insertThread(reader, { ...testThreadRow('o'), role: 'orchestration', status: 'running' });
    for (const c of ['c1', 'c2']) await insertThread(reader, { ...testThreadRow(c), parent_thread_id: 't-o', status: 'canceled' });
    for (const mode of ['force_generic_plan', 'force_custom_plan']) {
      await starter.run(`SET plan_cache_mode = ${mode}`);
      await writer.write(async (sql) => {
        const moved = await startThreadsInLockOrder(sql, { children: ['t-c1', 't-c2'], start: [], startParents: [], closeParents: ['t-o'] });
        expect(moved).toEqual([]);
        expect(await unlocked(['t-c1', 't-c2', 't-o']), mode).toEqual([]);
      });
    }
  });
});

describe("a start's items under the connection's generic plan", () => {
  it('moves every item claimed by the owner, or none (the guard at COMMIT)', async () => {
    await endedRows();
    const claimed = async (id: string, owner: string) => {
      await insertThread(reader, testThreadRow(id));
      await insertWorkItem(reader, testWorkItemRow(id, { status: 'claimed', lease_owner: owner, lease_expires_at: Date.now() + 60_000 }));
    };
    for (let i = 0; i < 6; i++) {
      await claimed(`m${i}a`, 'd1');
      await claimed(`m${i}b`, 'd1');
      await writer.write((sql) => markWorkItemsRunning(sql, [`m${i}a`, `m${i}b`], 'd1'));
      expect([(await getWorkItem(reader, `m${i}a`))?.status, (await getWorkItem(reader, `m${i}b`))?.status]).toEqual(['running', 'running']);
    }
    const plans = await planOf("UPDATE llm_work_items SET status = 'running'");
    expect(plans.generic).toBeGreaterThan(0);
    expect(plans.plan).toContain('llm_work_items_pkey');
    expect(plans.plan).not.toMatch(/Seq Scan on llm_work_items/);
    expect(plans.plan).not.toMatch(PARTIAL_INDEXES);
    await claimed('m6', 'd1');
    await writer.write((sql) => markWorkItemsRunning(sql, ['m6'], 'd1'));
    expect((await getWorkItem(reader, 'm6'))?.status).toBe('running');
    expect((await planOf("UPDATE llm_work_items SET status = 'running'")).custom).toBe(plans.custom);

    // On that connection, with that plan: one of the two is another daemon's, so neither moves.
    await claimed('n1', 'd1');
    await claimed('n2', 'd2');
    await expect(writer.write((sql) => markWorkItemsRunning(sql, ['n1', 'n2'], 'd1'))).rejects.toThrow(/not all claimed by d1/);
    expect([(await getWorkItem(reader, 'n1'))?.status, (await getWorkItem(reader, 'n2'))?.status]).toEqual(['claimed', 'claimed']);
  });
});
