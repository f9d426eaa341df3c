/**
 * Postgres's plans of the look-ups of a request key among complete threads (a repeated request's dedup:
 * `findLatestCompleteThreadByKey` and the bulk `latestCompleteThreadsByKeys`). Each reads
 * idx_threads_key_complete, whose predicate is `status = 'complete'`: the statements write that status
 * literally, since a generic plan, which Postgres keeps for a prepared statement after its first five
 * executions, could not match a bound `status = $2` to the predicate and would read the whole of
 * llm_threads at every submit. SQLite compares a bound status by its value (thread-key-complete-plans.test.ts),
 * so only this test sees a bound status. The single look-up runs six times on one connection and keeps
 * its generic plan; the bulk one's constant array (db/dialect.ts `inJsonArray`) makes its custom plans
 * cheaper than a generic one, so the connection would never keep one: it is planned generic here by
 * `plan_cache_mode`, the plan a bound status could not match. Sequential scans are off, so a plan with no
 * index path shows as a (disabled) Seq Scan whatever the table's size.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgSql } from '../../src/db/pg/sql.js';
import { findLatestCompleteThreadByKey, insertThread, latestCompleteThreadsByKeys } from '../../src/db/threads.js';
import { preparedPlansOf } from '../helpers/pg-prepared-plans.js';
import { createTestDatabase, openTestPool, type TestDatabase } from '../helpers/postgres.js';
import { testThreadRow } from '../helpers/rows.js';

const THREADS = 400;

let database: TestDatabase;
/** Two single connections, sequential scans off: the look-ups' prepared plans are read back on each. */
let pools: pg.Pool[] = [];
let byKey: PgSql;
let forcedGeneric: PgSql;

beforeAll(async () => {
  database = await createTestDatabase({ migrated: true });
  pools = [openTestPool(database.url, 1), openTestPool(database.url, 1)];
  [byKey, forcedGeneric] = pools.map((p) => new PgSql(p)) as [PgSql, PgSql];
  // Most threads complete, their keys repeated; a few open, each with a key of its own.
  for (let i = 0; i < THREADS; i++) {
    const status = i % 20 === 0 ? 'open' : 'complete';
    const key = status === 'open' ? `open${i}` : `k${i % 100}`;
    await insertThread(byKey, { ...testThreadRow(`${i}`), idempotency_key: key, status, created_at: i, closed_at: status === 'open' ? null : i });
  }
  await byKey.run('ANALYZE llm_threads');
  await byKey.run('SET enable_seqscan = off');
  await forcedGeneric.run('SET enable_seqscan = off');
  await forcedGeneric.run('SET plan_cache_mode = force_generic_plan');
});
afterAll(async () => {
  for (const pool of pools) await pool.end();
  await database?.drop();
});

describe('plans of the complete threads of a request key (Postgres)', () => {
  it("a repeated request's newest complete thread keeps a generic plan that reads idx_threads_key_complete", async () => {
    for (let i = 1; i <= 6; i++) expect((await findLatestCompleteThreadByKey(byKey, `k${i}`))?.id).toBe(`t-${300 + i}`);
    // Its plan for NULL parameters: the generic plan it keeps, whichever parameters the statement has.
    const plans = await preparedPlansOf(byKey, 'ORDER BY created_at DESC');
    expect(plans.generic, `${plans.generic} generic, ${plans.custom} custom`).toBeGreaterThan(0);
    expect(plans.plan).toContain('idx_threads_key_complete');
    expect(plans.plan).not.toMatch(/Seq Scan on llm_threads/);
  });

  it('the newest complete thread of many keys at once: its generic plan reads idx_threads_key_complete', async () => {
    const latest = await latestCompleteThreadsByKeys(forcedGeneric, ['k1', 'k2', 'open0']);
    expect([...latest.entries()].map(([key, row]) => [key, row.id])).toEqual([
      ['k1', 't-301'],
      ['k2', 't-302'],
    ]);
    const plans = await preparedPlansOf(forcedGeneric, 'ORDER BY created_at, id');
    expect({ generic: plans.generic, custom: plans.custom }).toEqual({ generic: 1, custom: 0 });
    expect(plans.plan).toContain('idx_threads_key_complete');
    expect(plans.plan).not.toMatch(/Seq Scan on llm_threads/);
  });
});
