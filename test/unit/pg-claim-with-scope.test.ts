/**
 * A claim and its scope's lock in one Postgres statement (db/claim-with-scope.ts): each case of the two
 * statements it replaced — `claimWorkItem`, then `acquireLockUnlessBusy` of the claimed item's scope — must
 * come out the same: the scope free, held by a live owner, expired, being taken by another transaction
 * right now (passed over at once, no wait), and no scope tried at all when nothing was claimed. Real
 * Postgres, the real writer and statements.
 */
import { describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { claimWorkItemWithScope } from '../../src/db/claim-with-scope.js';
import { acquireLock } from '../../src/db/locks.js';
import { insertThread } from '../../src/db/threads.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { useTestWriter } from '../helpers/postgres.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

const db = useTestWriter(4, { publish: () => {} });

async function addItem(id: string, scope: string): Promise<void> {
  await db.writer.write(async (sql) => {
    await insertThread(sql, testThreadRow(id));
    await insertWorkItem(sql, testWorkItemRow(id, { lock_scope: scope }));
  });
}

const claim = (sql: Sql, id: string, now = 10) => claimWorkItemWithScope(sql, { id, owner: 'daemon-a', now, lease_until: 1000 });
const lockRow = (scope: string) => db.reader.get('SELECT owner, acquired_at, expires_at FROM locks WHERE scope = ?', [scope]);

describe('a claim with its scope, in one statement', () => {
  it('takes a free scope until the lease ends', async () => {
    await addItem('f1', 'scope:f');
    const result = await db.writer.write((sql) => claim(sql, 'f1'));
    expect(result).toMatchObject({ scopeTaken: true, item: { id: 'f1', status: 'claimed', lease_owner: 'daemon-a', lease_expires_at: 1000 } });
    expect(result?.item).toEqual(await getWorkItem(db.reader, 'f1'));
    expect(await lockRow('scope:f')).toEqual({ owner: 'f1', acquired_at: 10, expires_at: 1000 });
  });

  it("claims the item but not a scope a live owner holds, nor takes over that owner's row", async () => {
    await addItem('h1', 'scope:h');
    await db.writer.write((sql) => acquireLock(sql, { scope: 'scope:h', owner: 'other', now: 0, expires_at: 500 }));
    expect(await db.writer.write((sql) => claim(sql, 'h1'))).toMatchObject({ scopeTaken: false, item: { id: 'h1', status: 'claimed' } });
    expect(await lockRow('scope:h')).toEqual({ owner: 'other', acquired_at: 0, expires_at: 500 });
  });

  it('takes over an expired scope', async () => {
    await addItem('e1', 'scope:e');
    await db.writer.write((sql) => acquireLock(sql, { scope: 'scope:e', owner: 'gone', now: 0, expires_at: 5 }));
    expect(await db.writer.write((sql) => claim(sql, 'e1'))).toMatchObject({ scopeTaken: true });
    expect(await lockRow('scope:e')).toEqual({ owner: 'e1', acquired_at: 10, expires_at: 1000 });
  });

  it('tries no scope when nothing was claimed', async () => {
    await addItem('n1', 'scope:n');
    await db.writer.write((sql) => claim(sql, 'n1'));
    await db.writer.write((sql) => sql.run("DELETE FROM locks WHERE scope = 'scope:n'"));
    // Claimed already: the update changes nothing, and the insert reads no claimed row.
    expect(await db.writer.write((sql) => claim(sql, 'n1', 20))).toBeUndefined();
    expect(await lockRow('scope:n')).toBeUndefined();
  });

  it('passes over a scope another transaction is taking right now, without waiting for it', async () => {
    await addItem('t1', 'scope:t');
    await addItem('t2', 'scope:t');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let first!: (v: unknown) => void;
    const firstResult = new Promise((r) => (first = r));
    const a = db.writer.write(async (sql) => {
      first(await claim(sql, 't1'));
      await gate;
    });
    expect(await firstResult).toMatchObject({ scopeTaken: true });
    // A's row is not committed: the NOT EXISTS does not see it, the advisory try fails.
    expect(await db.writer.write((sql) => claim(sql, 't2'))).toMatchObject({ scopeTaken: false, item: { id: 't2' } });
    release();
    await a;
    expect(await lockRow('scope:t')).toMatchObject({ owner: 't1' });
  });
});
