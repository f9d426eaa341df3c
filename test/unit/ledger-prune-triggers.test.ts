/** The database itself admits only the sanctioned prune path for ledger entries. */
import { SqliteSql } from '../../src/db/sql.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { appendLedgerEntry, getLedgerHead } from '../../src/ledger/store.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { deleteCheckpointedLedgerRun, insertLedgerCheckpoint } from '../../src/db/retention.js';
import { insertThread } from '../../src/db/threads.js';

let dir: string;
let db: Db;
let sql: SqliteSql;
beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cmb-prune-'));
  db = openDatabase(join(dir, 'combine.db'));
  sql = new SqliteSql(db);
  applyMigrations(db);
  await insertThread(sql, {
    id: 't',
    kind: 'k',
    space_type: 'project',
    space_id: 'p',
    target_ref: '{}',
    status: 'complete',
    parent_thread_id: null,
    idempotency_key: 'key',
    role: 'work',
    input: '{}',
    created_by: null,
    traceparent: null,
    created_at: 1,
    closed_at: 2,
  });
  for (let i = 0; i < 4; i++)
    await appendLedgerEntry(sql, { thread_id: 't', work_item_id: null, entry_type: 'prompt', attempt: null, payload: { i }, created_at: 1 });
});
afterEach(async () => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

const row = (db: Db, seq: number) => db.prepare('SELECT prev_hash, hash FROM llm_ledger_entries WHERE seq = ?').get(seq) as { prev_hash: string; hash: string };
const cp = (from: number, to: number, before: string, after: string) => ({
  from_seq: from,
  to_seq: to,
  hash_before: before,
  hash_after: after,
  prune_id: 'x',
  cutoff_at: 0,
  created_at: 0,
});

describe('ledger prune triggers', () => {
  it('refuse a DELETE no checkpoint covers', async () => {
    expect(() => db.prepare('DELETE FROM llm_ledger_entries WHERE seq = 2').run()).toThrow(/append-only/);
  });

  it('refuse a checkpoint whose hashes or run do not match the entries', async () => {
    await expect(insertLedgerCheckpoint(sql, cp(2, 3, 'wrong', row(db, 3).hash))).rejects.toThrow(/must describe/);
    await expect(insertLedgerCheckpoint(sql, cp(2, 3, row(db, 2).prev_hash, 'wrong'))).rejects.toThrow(/must describe/);
    await expect(insertLedgerCheckpoint(sql, cp(2, 9, row(db, 2).prev_hash, row(db, 3).hash))).rejects.toThrow(/must describe/);
  });

  it('allow deleting exactly the checkpointed run; the chain head stays and checkpoints are append-only', async () => {
    await insertLedgerCheckpoint(sql, cp(3, 4, row(db, 3).prev_hash, row(db, 4).hash));
    const head = await getLedgerHead(sql);
    expect(() => db.prepare('DELETE FROM llm_ledger_entries WHERE seq = 2').run()).toThrow(/append-only/);
    expect(await deleteCheckpointedLedgerRun(sql, 3, 4)).toBe(2);
    // The newest entries are gone; the next append continues at seq 5 from the checkpoint's hash.
    expect(await getLedgerHead(sql)).toEqual(head);
    expect(await appendLedgerEntry(sql, { thread_id: 't', work_item_id: null, entry_type: 'prompt', attempt: null, payload: {}, created_at: 1 })).toMatchObject(
      {
        seq: 5,
        prev_hash: head!.hash,
      },
    );
    expect(() => db.prepare('UPDATE llm_ledger_checkpoints SET hash_after = 0').run()).toThrow(/append-only/);
    expect(() => db.prepare('DELETE FROM llm_ledger_checkpoints').run()).toThrow(/append-only/);
  });
});
