/**
 * A start's two statements on Postgres under the plan a connection keeps for them: `startThreadsInLockOrder`
 * and `markWorkItemsRunning` are prepared once per connection, and after five executions the connection
 * keeps one generic plan (db/dialect.ts `inJsonArrayByKeyPg`). The other tests of these statements run each
 * a few times per connection, with custom plans; here one connection runs them until it keeps the generic
 * plan, with statistics gathered while no thread was active and no item leased (the statistics under which
 * a generic plan of a status test took a partial index of those rows), and each then still locks and moves
 * exactly what it did: children before orchestrations, each group in id order; every item or none.
 */
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { getThread, insertThread, startThreadsInLockOrder } from '../../src/db/threads.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { markWorkItemsRunning } from '../../src/db/work-item-moves.js';
import { waitUntil } from '../helpers/harness.js';
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
  // Rows enough for an index look-up to be the plan, all ended: then ANALYZE, so the statistics say no
  // thread is active and no item is leased.
  for (let i = 0; i < 200; i++) {
    await insertThread(reader, { ...testThreadRow(`done${String(i).padStart(3, '0')}`), status: 'complete' });
    await insertWorkItem(reader, testWorkItemRow(`done${String(i).padStart(3, '0')}`, { status: 'applied' }));
  }
  await reader.run('ANALYZE llm_threads');
  await reader.run('ANALYZE llm_work_items');
});
afterEach(async () => {
  await writer?.close();
  await onePool?.end();
  await pool?.end();
  await database?.drop();
});

/** The plans of the connection's prepared statement whose text has `marker`, and its plan for every call (EXPLAIN of its generic plan). */
async function planOf(marker: string): Promise<{ generic: number; custom: number; plan: string }> {
  const row = await starter.get<{ name: string; generic_plans: number; custom_plans: number; params: number }>(
    'SELECT name, generic_plans, custom_plans, cardinality(parameter_types) AS params FROM pg_prepared_statements WHERE strpos(statement, ?) > 0',
    [marker],
  );
  if (!row) throw new Error(`no prepared statement with ${marker}`);
  const args = Array.from({ length: row.params }, () => 'NULL').join(', ');
  const plan = await starter.all<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) EXECUTE ${row.name}(${args})`);
  return { generic: Number(row.generic_plans), custom: Number(row.custom_plans), plan: plan.map((r) => r['QUERY PLAN']).join('\n') };
}

const PARTIAL_INDEXES =
  /idx_threads_active|uq_threads_idempotency_active|idx_threads_ended_badly|idx_work_items_leased|idx_work_items_claimable|idx_work_items_fair/;

describe("a start's threads under the connection's generic plan", () => {
  it('locks the children first, then the orchestrations, each in id order, and moves exactly the open ones', async () => {
    for (const o of ['x', 'y']) await insertThread(reader, { ...testThreadRow(o), role: 'orchestration', status: 'open' });
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
    expect(plans.plan).not.toMatch(PARTIAL_INDEXES);

    // t-x open, t-y running; children t-a (of x) and t-c (of y) to start, t-b (of y) failing: locked, not
    // moved, and its orchestration t-y locked (it may close it).
    await insertThread(reader, { ...testThreadRow('a'), parent_thread_id: 't-x' });
    await insertThread(reader, { ...testThreadRow('b'), parent_thread_id: 't-y' });
    await insertThread(reader, { ...testThreadRow('c'), parent_thread_id: 't-y' });
    const holder = await pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query("SELECT 1 FROM llm_threads WHERE id = 't-x' FOR NO KEY UPDATE");
      const start = startThreadsInLockOrder(starter, {
        children: ['t-c', 't-b', 't-a'],
        start: ['t-c', 't-a'],
        startParents: ['t-y', 't-x'],
        closeParents: ['t-y'],
      });
      await waitUntil(() => aWriteWaitsForALock(reader), 'the start to wait for t-x');
      // Waiting for t-x: it holds every child, and not yet t-y, which comes after t-x.
      const free = await reader.all<{ id: string }>(
        "SELECT id FROM llm_threads WHERE id IN ('t-a', 't-b', 't-c', 't-y') ORDER BY id FOR NO KEY UPDATE SKIP LOCKED",
      );
      expect(free.map((r) => r.id)).toEqual(['t-y']);
      await holder.query('COMMIT');
      const moved = await start;
      expect(moved.map((t) => [t.id, t.status]).sort()).toEqual([
        ['t-a', 'running'],
        ['t-c', 'running'],
        ['t-x', 'running'],
      ]);
    } finally {
      holder.release();
    }
    expect((await getThread(reader, 't-b'))?.status).toBe('open');
    // No custom plan since: that start ran the generic one.
    expect((await planOf("UPDATE llm_threads SET status = 'running'")).custom).toBe(plans.custom);
  });
});

describe("a start's items under the connection's generic plan", () => {
  it('moves every item claimed by the owner, or none (the guard at COMMIT)', async () => {
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
