/**
 * The statements several daemons on one Postgres database race on (issue 18), against a real server,
 * two transactions at once: a claim passes over an item another transaction is claiming (no waiting, no
 * second lease), two claim rounds that picked the same head read two different items of its group, the recovery scan's listing passes over a lease being rescued elsewhere, and the lock
 * sweep leaves alone a lock row another transaction is taking for a fresh claim; a claim undone (its lock
 * scope taken by another daemon meanwhile) leaves the item exactly as it was.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { readClaimCandidate } from '../../src/db/item-with-thread.js';
import { acquireLock, releaseLock, releaseOrphanedLocks } from '../../src/db/locks.js';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertThread } from '../../src/db/threads.js';
import { lockExpiredLeases } from '../../src/db/leases.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { claimWorkItem, unclaimWorkItem } from '../../src/db/work-item-claims.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let database: TestDatabase;
let pool: pg.Pool;
let reader: PgSql;
let writer: PgWriter<never>;

beforeAll(async () => {
  database = await createTestDatabase();
  await applyPgMigrations(database.url);
  pool = openTestPool(database.url, 4);
  reader = new PgSql(pool);
  writer = new PgWriter<never>(pool, { publish: () => {} });
});
afterAll(async () => {
  await writer?.close();
  await pool?.end();
  await database?.drop();
});

async function addItem(sql: Sql, id: string, leased: { owner: string; expires: number } | null = null): Promise<void> {
  await insertThread(sql, testThreadRow(id));
  const lease = leased ? { status: 'running' as const, lease_owner: leased.owner, lease_expires_at: leased.expires } : {};
  await insertWorkItem(sql, testWorkItemRow(id, { lock_scope: `scope:${id}`, ...lease }));
}

/** Runs `fn` in a transaction that stays open until the returned `release` is called. */
function openTransaction<T>(fn: (sql: Sql) => Promise<T>): { result: Promise<T>; done: Promise<unknown>; release: () => void } {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let resolveResult!: (v: T) => void;
  const result = new Promise<T>((r) => (resolveResult = r));
  const done = writer.write(async (sql) => {
    resolveResult(await fn(sql));
    await gate;
  });
  return { result, done, release };
}

describe('statements daemons race on, two transactions at once', () => {
  it('a claim passes over an item another transaction is claiming, at once and without a second lease', async () => {
    await writer.write((sql) => addItem(sql, 'w1'));
    const a = openTransaction((sql) => claimWorkItem(sql, { id: 'w1', owner: 'daemon-a', now: 10, lease_until: 1000 }));
    expect((await a.result)?.lease_owner).toBe('daemon-a');
    // B runs while A's transaction is still open: it must not wait for it (the write would hang).
    const b = await writer.write((sql) => claimWorkItem(sql, { id: 'w1', owner: 'daemon-b', now: 10, lease_until: 1000 }));
    expect(b).toBeUndefined();
    a.release();
    await a.done;
    expect(await getWorkItem(reader, 'w1')).toMatchObject({ status: 'claimed', lease_owner: 'daemon-a' });
    // Once A committed, the guard refuses B too: the item is no longer queued.
    expect(await writer.write((sql) => claimWorkItem(sql, { id: 'w1', owner: 'daemon-b', now: 20, lease_until: 1000 }))).toBeUndefined();
  });

  it("two claim rounds that picked the same head read two of its group's items, and no item whose scope is held", async () => {
    await writer.write(async (sql) => {
      for (const [id, due] of [
        ['g1', 1],
        ['g2', 2],
        ['g3', 3],
      ] as const) {
        await insertThread(sql, testThreadRow(id));
        await insertWorkItem(sql, testWorkItemRow(id, { project_id: 'g', not_before: due, lock_scope: `scope:${id}` }));
      }
      // Another item holds g2's scope: no round can claim g2 now.
      expect(await acquireLock(sql, { scope: 'scope:g2', owner: 'other-item', now: 0, expires_at: 1000 })).toBe(true);
    });
    const head = { id: 'g1', project_id: 'g', priority: 0 };
    const a = openTransaction((sql) => readClaimCandidate(sql, head, 10, []));
    expect((await a.result)?.item.id).toBe('g1');
    // B picked the same head while A's round is open: it reads the group's next claimable item, at once.
    const b = openTransaction((sql) => readClaimCandidate(sql, head, 10, []));
    expect((await b.result)?.item.id).toBe('g3');
    // A third round finds nothing left in the group.
    expect(await writer.write((sql) => readClaimCandidate(sql, head, 10, []))).toBeUndefined();
    // g2's scope frees while A and B are open: neither took g2's claim lock (its scope was held when
    // they passed it), so a round can read it now.
    await writer.write((sql) => releaseLock(sql, 'scope:g2', 'other-item'));
    expect((await writer.write((sql) => readClaimCandidate(sql, head, 10, [])))?.item.id).toBe('g2');
    a.release();
    b.release();
    await Promise.all([a.done, b.done]);
    // Once they committed (without claiming), their items are free again; a round's own skipped items are passed over.
    expect((await writer.write((sql) => readClaimCandidate(sql, head, 10, ['g1'])))?.item.id).toBe('g2');
  });

  it("a round's read tries the claim lock of one item only, however many its group holds (the plan walks the group in order)", async () => {
    await writer.write(async (sql) => {
      for (let i = 0; i < 300; i++) {
        const id = `big${String(i).padStart(3, '0')}`;
        await insertThread(sql, testThreadRow(id));
        await insertWorkItem(sql, testWorkItemRow(id, { project_id: 'big', not_before: i }));
      }
    });
    await reader.run('ANALYZE llm_work_items');
    const head = { id: 'big000', project_id: 'big', priority: 0 };
    // Had a round's read locked every item it looked at (a sort after the filter), the next would find none.
    const a = openTransaction((sql) => readClaimCandidate(sql, head, 1000, []));
    expect((await a.result)?.item.id).toBe('big000');
    const b = openTransaction((sql) => readClaimCandidate(sql, head, 1000, []));
    expect((await b.result)?.item.id).toBe('big001');
    a.release();
    b.release();
    await Promise.all([a.done, b.done]);
  });

  it("a claim undone (another daemon took the item's lock scope meanwhile) leaves the item exactly as it was", async () => {
    // An item parked for its budget and unparked, never started: the claim clears the park and sets its
    // first start — what the undo must put back.
    await writer.write(async (sql) => {
      await insertThread(sql, testThreadRow('u1'));
      await insertWorkItem(sql, testWorkItemRow('u1', { not_before: 5, error_code: 'BUDGET_EXCEEDED', error_message: 'over the daily budget' }));
    });
    const before = (await getWorkItem(reader, 'u1'))!;
    const claimed = await writer.write((sql) => claimWorkItem(sql, { id: 'u1', owner: 'daemon-a', now: 10, lease_until: 1000 }));
    expect(claimed).toMatchObject({ status: 'claimed', lease_owner: 'daemon-a', started_at: 10, error_code: null });
    // Only the claim's owner can undo it; every column the claim changed is back (a column the claim
    // learns to change and the undo forgets fails here).
    await expect(writer.write((sql) => unclaimWorkItem(sql, { owner: 'daemon-b', before }))).rejects.toThrow(/not claimed by daemon-b/);
    await writer.write((sql) => unclaimWorkItem(sql, { owner: 'daemon-a', before }));
    expect(await getWorkItem(reader, 'u1')).toEqual(before);
    // And it can be claimed again.
    expect(await writer.write((sql) => claimWorkItem(sql, { id: 'u1', owner: 'daemon-b', now: 20, lease_until: 1000 }))).toMatchObject({
      lease_owner: 'daemon-b',
    });
  });

  it('the recovery listing passes over an expired lease another daemon is rescuing', async () => {
    await writer.write(async (sql) => {
      await addItem(sql, 'r1', { owner: 'dead-1', expires: 50 });
      await addItem(sql, 'r2', { owner: 'dead-2', expires: 60 });
    });
    const a = openTransaction((sql) => lockExpiredLeases(sql, 100, 1));
    expect((await a.result).map((i) => i.id)).toEqual(['r1']);
    const b = await writer.write((sql) => lockExpiredLeases(sql, 100, 10));
    expect(b.map((i) => i.id)).toEqual(['r2']);
    a.release();
    await a.done;
  });

  it('the lock sweep leaves alone a lock another transaction is taking for a claim it has not committed', async () => {
    await writer.write(async (sql) => {
      await addItem(sql, 'l1');
      // The lock row left by an item that has since ended: orphaned, expired.
      expect(await acquireLock(sql, { scope: 'scope:l1', owner: 'gone-item', now: 0, expires_at: 5 })).toBe(true);
    });
    const a = openTransaction(async (sql) => {
      const claimed = await claimWorkItem(sql, { id: 'l1', owner: 'daemon-a', now: 10, lease_until: 1000 });
      return claimed && (await acquireLock(sql, { scope: 'scope:l1', owner: 'l1', now: 10, expires_at: 1000 }));
    });
    expect(await a.result).toBe(true);
    // The sweep's snapshot sees l1 queued and the row orphaned, but A holds the row: passed over.
    expect(await writer.write((sql) => releaseOrphanedLocks(sql))).toEqual([]);
    a.release();
    await a.done;
    expect(await reader.get('SELECT owner FROM locks WHERE scope = ?', ['scope:l1'])).toEqual({ owner: 'l1' });
    // Committed and leased: not orphaned either.
    expect(await writer.write((sql) => releaseOrphanedLocks(sql))).toEqual([]);
  });
});
