/**
 * The recovery scan's one-by-one rescue (engine/lease-upkeep.ts `rescueEach`, after its batch failed) takes
 * an item again only while its lease is as the scan found it (db/leases.ts `lockLeaseIfUnchanged`): an
 * item another worker or daemon took meanwhile, or that ended, is not rescued — a rescue of a live lease
 * would resume or requeue a call that is still being paid for (paid twice). Real Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lockLeaseIfUnchanged } from '../../src/db/leases.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
beforeAll(async () => {
  db = await openRaceDatabase();
});
afterAll(() => db?.drop());

describe('an expired lease taken again for a rescue of its own', () => {
  it('is taken only while its owner, lease end and status are as the scan found them', async () => {
    await insertThread(db.reader, { ...testThreadRow('a'), status: 'running' });
    await insertWorkItem(db.reader, testWorkItemRow('a', { status: 'running', lease_owner: 'd1', lease_expires_at: 1_000 }));
    const scanned = { id: 'a', lease_owner: 'd1', lease_expires_at: 1_000 };
    const take = () => db.write((tx) => lockLeaseIfUnchanged(tx.sql, scanned));
    expect(await take()).toMatchObject({ id: 'a', lease_owner: 'd1' });
    await db.reader.run("UPDATE llm_work_items SET lease_expires_at = 9000 WHERE id = 'a'");
    expect(await take()).toBeUndefined();
    await db.reader.run("UPDATE llm_work_items SET lease_expires_at = 1000, lease_owner = 'd2' WHERE id = 'a'");
    expect(await take()).toBeUndefined();
    await db.reader.run("UPDATE llm_work_items SET lease_owner = 'd1', status = 'applied' WHERE id = 'a'");
    expect(await take()).toBeUndefined();
  });
});
