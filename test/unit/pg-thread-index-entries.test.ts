/**
 * What a thread's life writes into llm_threads' indexes on Postgres, counted in the server's WAL (pg_walinspect:
 * one btree leaf insert per entry). A status move changes an indexed column, so it is never a HOT update and
 * takes a new entry in every index whose predicate the moved row meets: each index a thread does not need while
 * it is open or running costs three entries per thread (its insert, its start, its end), one per status move
 * of every item in bench target 9. The request's key is indexed for complete threads only (what a repeated
 * request and retention look up), so it costs a thread one entry, at its completion; and a repeated request is
 * still answered by the newest complete thread of its key, not an older one or a failed one (which index those
 * look-ups read at 1,000,000 threads: bench/explain-big-pg.ts; on SQLite, thread-key-complete-plans.test.ts).
 */
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PgSql } from '../../src/db/pg/sql.js';
import { findLatestCompleteThreadByKey, insertThread, latestCompleteThreadsByKeys, transitionThread } from '../../src/db/threads.js';
import { createTestDatabase, openTestPool, type TestDatabase } from '../helpers/postgres.js';
import { walByRelation } from '../helpers/pg-wal.js';
import { testThreadRow } from '../helpers/rows.js';

let database: TestDatabase;
let pool: pg.Pool;
let sql: PgSql;

beforeEach(async () => {
  database = await createTestDatabase({ migrated: true });
  pool = openTestPool(database.url, 1);
  sql = new PgSql(pool);
  await sql.run('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  // The test server commits without waiting for the WAL's flush, and pg_walinspect reads flushed WAL only: this
  // session's (the pool's one connection's) commits wait for it.
  await sql.run('SET synchronous_commit = on');
});
afterEach(async () => {
  await pool?.end();
  await database?.drop();
});

const lsn = async (): Promise<string> => (await sql.get<{ lsn: string }>('SELECT pg_current_wal_lsn() AS lsn'))!.lsn;

/** The entries `write` put in the indexes of the request key of complete threads, `idx_threads_key_*` (none but
 *  idx_threads_key_complete since 0024), by index: from its WAL's btree leaf inserts and splits. */
async function keyIndexEntriesOf(write: () => Promise<unknown>): Promise<Record<string, number>> {
  const from = await lsn();
  await write();
  const wal = await walByRelation(pool, from);
  return Object.fromEntries(wal.filter((r) => r.rel.startsWith('idx_threads_key_') && r.entries > 0).map((r) => [r.rel, r.entries]));
}

describe("a thread's index entries on Postgres", () => {
  it("writes its request key's entry at its completion only, none at its insert or its start", async () => {
    // An orchestration's child, as every item's thread in bench target 9.
    await insertThread(sql, { ...testThreadRow('p'), role: 'orchestration' });
    const row = { ...testThreadRow('k'), parent_thread_id: 't-p' };
    const inserted = await keyIndexEntriesOf(() => insertThread(sql, row));
    const started = await keyIndexEntriesOf(() => transitionThread(sql, row, 'open', 'running', 2));
    const completed = await keyIndexEntriesOf(() => transitionThread(sql, row, 'running', 'complete', 3));
    // With every thread's key indexed (idx_threads_key_created, before 0024) each of the three took an entry.
    expect([inserted, started, completed]).toEqual([{}, {}, { idx_threads_key_complete: 1 }]);
  });

  it('answers a repeated request with the newest complete thread of its key, not an older one or one that failed', async () => {
    for (const [id, status, created] of [
      ['t-old', 'complete', 1],
      ['t-new', 'complete', 5],
      ['t-failed', 'failed', 9],
    ] as const) {
      await insertThread(sql, { ...testThreadRow('k'), id, status, created_at: created, closed_at: created + 1 });
    }
    await insertThread(sql, { ...testThreadRow('other'), status: 'complete' });
    expect((await findLatestCompleteThreadByKey(sql, 'k'))?.id).toBe('t-new');
    const latest = await latestCompleteThreadsByKeys(sql, ['k', 'other', 'none']);
    expect([...latest.entries()].map(([k, t]) => [k, t.id]).sort()).toEqual([
      ['k', 't-new'],
      ['other', 't-other'],
    ]);
  });
});
