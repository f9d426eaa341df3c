/**
 * An orchestration's close on Postgres (db/threads.ts `lockThreadForClose`, one function call since
 * migrations/pg/0012): the row is locked before the children are looked at, so of two last children
 * ending at once, the second sees the first's end. Pinned with a gate: the first holds the parent's lock,
 * uncommitted, while the second's call waits for it; once the first commits, the second's answer must
 * count the first child as ended. Real Postgres, rows inserted directly.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertThread, lockThreadForClose, transitionThread } from '../../src/db/threads.js';
import { waitUntil } from '../helpers/harness.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';
import { testThreadRow } from '../helpers/rows.js';

function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

describe('Postgres: an orchestration locked for its close', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let reader: Sql;
  let writer: PgWriter;

  beforeAll(async () => {
    database = await createTestDatabase({ migrated: true });
    pool = openTestPool(database.url, 4);
    reader = new PgSql(pool);
    writer = new PgWriter(pool, { conflictAttempts: 1, raceAttempts: 1 });
    await insertThread(reader, { ...testThreadRow('p'), status: 'running', role: 'orchestration', input: '{"epics":["E1","E2"]}' });
    for (const key of ['a', 'b']) await insertThread(reader, { ...testThreadRow(key), status: 'running', parent_thread_id: 't-p' });
  });
  afterAll(async () => {
    await writer.close();
    await pool.end();
    await database.drop();
  });

  it('gives the row as stored and, after waiting for the lock, counts a child that ended meanwhile', async () => {
    const firstLocked = gate();
    const firstGoes = gate();
    const first = writer.write(async (sql) => {
      await transitionThread(sql, 't-a', 'running', 'complete', 10);
      const seen = await lockThreadForClose(sql, 't-p');
      firstLocked.open();
      await firstGoes.opened;
      return seen;
    });
    await firstLocked.opened;
    const second = writer.write(async (sql) => {
      await transitionThread(sql, 't-b', 'running', 'complete', 11);
      return lockThreadForClose(sql, 't-p');
    });
    // The second waits for the parent's row, which the first holds.
    const waiting = "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'";
    await waitUntil(async () => (await reader.get<{ n: number }>(waiting))!.n === 1, 'the second close waiting for the lock');
    firstGoes.open();
    const [a, b] = await Promise.all([first, second]);
    expect(a).toEqual({ thread: { ...testThreadRow('p'), status: 'running', role: 'orchestration', input: '{"epics":["E1","E2"]}' }, activeChild: true });
    expect(b?.activeChild).toBe(false);
    expect(b?.thread.id).toBe('t-p');
    expect(await writer.write((sql) => lockThreadForClose(sql, 't-none'))).toBeUndefined();
  });
});
