/**
 * `lockWorkItemsWithThreads` (a record's or a finish's items, with their threads, projects and read-ahead) on
 * Postgres under the plan a connection keeps for it: prepared once per connection, it keeps one generic plan
 * after its first five executions (db/dialect.ts `inJsonArrayInitPlanPg`), whatever the number of ids (a
 * record's few items made a custom plan cheaper with a constant array, and the join of four tables was planned
 * again at every call). One connection runs it on a table of ~1,000 ended items: it still reads exactly the
 * items it names, and the generic plan looks them up by llm_work_items' primary key.
 */
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { lockWorkItemsWithThreads, type ReadAhead } from '../../src/db/item-with-thread.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { preparedPlansOf } from '../helpers/pg-prepared-plans.js';
import { createTestDatabase, openTestPool, type TestDatabase } from '../helpers/postgres.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let database: TestDatabase;
/** One connection: every lock runs on it, so its prepared statement reaches its generic plan. */
let onePool: pg.Pool;
let locker: PgSql;
let pool: pg.Pool;
let reader: PgSql;

beforeEach(async () => {
  database = await createTestDatabase({ migrated: true });
  onePool = openTestPool(database.url, 1);
  locker = new PgSql(onePool);
  pool = openTestPool(database.url, 2);
  reader = new PgSql(pool);
});
afterEach(async () => {
  await onePool?.end();
  await pool?.end();
  await database?.drop();
});

describe('locking a few items with their threads, over and over on one connection', () => {
  it.each<ReadAhead>(['rows', 'record'])('keeps the generic plan (read-ahead %s) and reads exactly the items named', async (ahead) => {
    for (let i = 0; i < 1000; i++) {
      const key = `done${String(i).padStart(4, '0')}`;
      await insertThread(reader, { ...testThreadRow(key), status: 'complete' });
      await insertWorkItem(reader, testWorkItemRow(key, { status: 'applied' }));
    }
    for (const key of ['a', 'b', 'c']) {
      await insertThread(reader, testThreadRow(key));
      await insertWorkItem(reader, testWorkItemRow(key));
    }
    await reader.run('ANALYZE llm_threads');
    await reader.run('ANALYZE llm_work_items');
    const lists = [['a'], ['b', 'c'], ['c'], ['a', 'b'], ['b'], ['a', 'c'], ['c', 'x'], ['a']];
    for (const ids of lists) {
      // Autocommit: each statement its own transaction, its locks released at its end.
      const reads = await lockWorkItemsWithThreads(locker, ids, ahead);
      expect([...reads.keys()].sort()).toEqual(ids.filter((id) => id !== 'x'));
      for (const [id, read] of reads) expect(read.thread.id).toBe(`t-${id}`);
    }
    // The first five executions were custom plans; every later one ran the generic plan the connection kept.
    const plans = await preparedPlansOf(locker, 'FOR NO KEY UPDATE OF w');
    expect({ generic: plans.generic, custom: plans.custom }).toEqual({ generic: lists.length - 5, custom: 5 });
    // And that generic plan looks each item up by its primary key, not by a scan of llm_work_items.
    expect(plans.plan).toMatch(/Index Scan using llm_work_items_pkey on llm_work_items w/);
    expect(plans.plan).not.toMatch(/Seq Scan on llm_work_items/);
  });
});
