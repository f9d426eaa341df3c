/** The queue depth that backpressure reads is kept exact by the database's own triggers. */
import { Writer } from '../../src/db/writer.js';
import { SqliteSql } from '../../src/db/sql.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { insertThread } from '../../src/db/threads.js';
import { countQueuedWorkItems, insertWorkItem } from '../../src/db/work-items.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let dir: string;
let db: Db;
let sql: SqliteSql;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cmb-depth-'));
  db = openDatabase(join(dir, 'combine.db'));
  sql = new SqliteSql(db);
  applyMigrations(db);
});
afterEach(async () => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function addItem(id: string, status: 'queued' | 'applied'): Promise<void> {
  await insertThread(sql, testThreadRow(id));
  await insertWorkItem(sql, testWorkItemRow(id, { status }));
}

const counted = () => (db.prepare("SELECT count(*) AS n FROM llm_work_items WHERE status = 'queued'").get() as { n: number }).n;
const setStatus = (id: string, status: string) => db.prepare('UPDATE llm_work_items SET status = ? WHERE id = ?').run(status, id);

describe('queue depth', () => {
  it('follows every insert, status change and delete of a work item', async () => {
    expect(await countQueuedWorkItems(sql)).toBe(0);
    for (const id of ['a', 'b', 'c']) await addItem(id, 'queued');
    await addItem('d', 'applied');
    const steps: [string, () => unknown, number][] = [
      ['three queued, one applied', () => {}, 3],
      ['a leased', () => setStatus('a', 'claimed'), 2],
      ['a back in the queue for a retry', () => setStatus('a', 'queued'), 3],
      ['b set to queued again (no change)', () => setStatus('b', 'queued'), 3],
      ['an update that leaves status alone', () => db.prepare("UPDATE llm_work_items SET not_before = 5 WHERE id = 'c'").run(), 3],
      ['c canceled (a canceled item ends failed)', () => setStatus('c', 'failed'), 2],
      ['a queued item deleted', () => db.prepare("DELETE FROM llm_work_items WHERE id = 'b'").run(), 1],
      ['a finished item deleted', () => db.prepare("DELETE FROM llm_work_items WHERE id = 'd'").run(), 1],
    ];
    for (const [what, step, expected] of steps) {
      step();
      expect({ what, depth: await countQueuedWorkItems(sql) }).toEqual({ what, depth: expected });
      expect(await countQueuedWorkItems(sql)).toBe(counted());
    }
  });

  it('rolls back with the transaction that changed the queue', async () => {
    await addItem('a', 'queued');
    const writer = new Writer(db);
    await expect(
      writer.write(async () => {
        await addItem('b', 'queued');
        throw new Error('command refused');
      }),
    ).rejects.toThrow('command refused');
    expect(await countQueuedWorkItems(sql)).toBe(1);
  });
});
