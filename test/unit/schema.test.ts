import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { expectGolden } from '../helpers/golden.js';

describe('migrated schema', () => {
  let dir: string;
  let db: Db;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-schema-'));
    db = openDatabase(join(dir, 'combine.db'));
    applyMigrations(db);
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('equals the committed snapshot', () => {
    const rows = db.prepare("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' ORDER BY type, name").all() as {
      type: string;
      name: string;
      sql: string;
    }[];
    expectGolden('schema.sql', rows.map((r) => `-- ${r.type} ${r.name}\n${r.sql};\n`).join('\n'));
  });

  it('sets WAL, synchronous=FULL, foreign keys and a busy timeout', () => {
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    expect(db.pragma('synchronous', { simple: true })).toBe(2);
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(db.pragma('busy_timeout', { simple: true })).toBeGreaterThan(0);
  });

  it('is idempotent: a second run applies nothing', () => {
    expect(applyMigrations(db).applied).toBe(0);
  });

  it('refuses UPDATE and DELETE of ledger entries in the database itself', () => {
    db.prepare("INSERT INTO projects (id, name, created_at) VALUES ('p', 'P', 0)").run();
    db.prepare(
      `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, idempotency_key, created_at)
       VALUES ('t', 'k', 'project', 'p', '{}', 'open', 'key', 0)`,
    ).run();
    db.prepare(
      `INSERT INTO llm_ledger_entries (seq, thread_id, entry_type, payload, prev_hash, hash, created_at)
       VALUES (1, 't', 'prompt', '{}', 'x', 'y', 0)`,
    ).run();
    expect(() => db.prepare('UPDATE llm_ledger_entries SET payload = \'{"x":1}\' WHERE seq = 1').run()).toThrow(/append-only/);
    expect(() => db.prepare('DELETE FROM llm_ledger_entries WHERE seq = 1').run()).toThrow(/append-only/);
    expect(db.prepare('SELECT payload FROM llm_ledger_entries WHERE seq = 1').get()).toEqual({ payload: '{}' });
  });

  const insertThread = (status: string) =>
    db
      .prepare(
        `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, idempotency_key, created_at)
         VALUES ('t', 'k', 'project', 'p', '{}', ?, 'key', 0)`,
      )
      .run(status);

  it('refuses a status outside the machine, on insert and on update, like a CHECK constraint', () => {
    db.prepare("INSERT INTO projects (id, name, created_at) VALUES ('p', 'P', 0)").run();
    expect(() => insertThread('done')).toThrow(/CHECK constraint failed: llm_threads.status/);
    insertThread('open');
    expect(() => db.prepare("UPDATE llm_threads SET status = 'finished' WHERE id = 't'").run()).toThrow(/CHECK constraint failed: llm_threads.status/);
    expect(db.prepare("SELECT status FROM llm_threads WHERE id = 't'").get()).toEqual({ status: 'open' });
    for (const table of ['llm_work_items', 'llm_charges', 'schedules', 'schedule_runs']) {
      const triggers = db
        .prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? AND name LIKE '%status_check%' ORDER BY name")
        .all(table);
      expect(triggers, table).toHaveLength(2);
    }
  });
});
