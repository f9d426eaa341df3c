/**
 * What a thread's life writes into llm_threads' indexes on Postgres, counted in the server's WAL (pg_walinspect:
 * one btree leaf insert per entry). A status move changes an indexed column, so it is never a HOT update and
 * takes a new entry in every index whose predicate the moved row meets: each index a thread does not need while
 * it is open or running costs three entries per thread (its insert, its start, its end), one per status move
 * of every item in bench target 9. The request's key is indexed for complete threads only (what a repeated
 * request and retention look up), so it costs a thread one entry, at its completion; and a repeated request is
 * still answered by the newest complete thread of its key, read through that index.
 */
import type pg from 'pg';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { PgSql } from '../../src/db/pg/sql.js';
import { findLatestCompleteThreadByKey, insertThread, latestCompleteThreadsByKeys, transitionThread } from '../../src/db/threads.js';
import { createTestDatabase, openTestPool, type TestDatabase } from '../helpers/postgres.js';
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

/** The index entries `write` put in each of llm_threads' indexes (its WAL's btree leaf inserts and splits), by index. */
async function entriesOf(write: () => Promise<unknown>): Promise<Record<string, number>> {
  const from = await lsn();
  await write();
  const rows = await sql.all<{ index: string; n: number }>(
    `SELECT c.relname AS index, count(*)::int AS n
       FROM pg_get_wal_block_info(CAST(@from AS pg_lsn), pg_current_wal_lsn()) b
       JOIN pg_class c ON c.relfilenode = b.relfilenode
       JOIN pg_index i ON i.indexrelid = c.oid AND i.indrelid = 'llm_threads'::regclass
      WHERE b.block_id = 0 AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
        AND b.resource_manager = 'Btree' AND split_part(b.record_type, ' ', 1) IN ('INSERT_LEAF', 'INSERT_POST', 'SPLIT_L', 'SPLIT_R')
      GROUP BY 1`,
    { from },
  );
  return Object.fromEntries(rows.map((r) => [r.index, r.n]));
}

const total = (entries: Record<string, number>): number => Object.values(entries).reduce((a, b) => a + b, 0);

describe("a thread's index entries on Postgres", () => {
  it("writes eight entries at a child's insert and at its start, seven at its completion, one of them its key", async () => {
    // An orchestration's child, as every item's thread in bench target 9.
    await insertThread(sql, { ...testThreadRow('p'), role: 'orchestration' });
    const row = { ...testThreadRow('k'), parent_thread_id: 't-p' };
    const inserted = await entriesOf(() => insertThread(sql, row));
    const started = await entriesOf(() => transitionThread(sql, row, 'open', 'running', 2));
    const completed = await entriesOf(() => transitionThread(sql, row, 'running', 'complete', 3));
    expect([total(inserted), total(started), total(completed)]).toEqual([8, 8, 7]);
    expect([inserted, started, completed].map((e) => e.idx_threads_key_complete ?? 0)).toEqual([0, 0, 1]);
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
