/**
 * `lockWorkItemsWithThreads` (a record's or a finish's items, with their threads, projects and read-ahead) on
 * Postgres under the plan a connection keeps for it: prepared once per connection, it keeps one generic plan
 * after its first five executions (db/dialect.ts `inJsonArrayInitPlanPg`), whatever the number of ids (a
 * record's few items made a custom plan cheaper with a constant array, and the join of four tables was planned
 * again at every call). One connection runs it on a table of ~1,000 ended items, and it still locks and reads
 * exactly the items it names.
 */
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { lockWorkItemsWithThreads, type ReadAhead } from '../../src/db/item-with-thread.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
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

/** The connection's plans of its prepared statement whose text has `marker`. */
async function plansOf(marker: string): Promise<{ generic: number; custom: number }> {
  const row = await locker.get<{ generic_plans: number; custom_plans: number }>(
    'SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE strpos(statement, ?) > 0',
    [marker],
  );
  if (!row) throw new Error(`no prepared statement with ${marker}`);
  return { generic: Number(row.generic_plans), custom: Number(row.custom_plans) };
}

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
    for (const [i, ids] of lists.entries()) {
      // Autocommit: each statement its own transaction, its locks released at its end.
      const reads = await lockWorkItemsWithThreads(locker, ids, ahead);
      expect([...reads.keys()].sort()).toEqual(ids.filter((id) => id !== 'x'));
      for (const [id, read] of reads) expect(read.thread.id).toBe(`t-${id}`);
      // The first five executions are custom plans, then the connection keeps the generic one.
      if (i === 5) expect(await plansOf('FOR NO KEY UPDATE OF w')).toEqual({ generic: 1, custom: 5 });
    }
    // No custom plan since: every later execution ran the generic one.
    expect(await plansOf('FOR NO KEY UPDATE OF w')).toEqual({ generic: lists.length - 5, custom: 5 });
  });
});
