/**
 * The Postgres schema on a real Postgres (the run's embedded server, a database per test): migrations
 * apply once however many daemons start together; the database itself keeps the ledger append-only
 * and one chain, as SQLite's triggers do; the queue-depth bookkeeping stays exact, step for step equal
 * to SQLite's, under concurrent transactions too; status columns refuse what SQLite's refuse.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import { readMigrationFiles } from 'drizzle-orm/migrator';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { connectPostgres } from '../../src/db/pg/connection.js';
import { applyPgMigrations, defaultPgMigrationsFolder } from '../../src/db/pg/migrate.js';
import * as pgSchemaTables from '../../src/db/pg/schema.js';
import * as pgScheduleTables from '../../src/db/pg/schema-schedules.js';
import { findChainBreak, GENESIS_HASH, ledgerEntryHash } from '../../src/ledger/chain.js';
import { appendLedgerEntries } from '../../src/ledger/store.js';
import { RUN_STATUSES, SCHEDULE_STATUSES } from '../../src/domain/schedule.js';
import { CHARGE_STATUSES, THREAD_STATUSES, WORK_ITEM_STATUSES } from '../../src/domain/states.js';
import type { LedgerRow } from '../../src/db/schema.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';
import { EXPECTED_CHARGES, EXPECTED_CHARGES_SQL, EXPECTED_USAGE, OLD_HOME } from '../helpers/call-records-migration.js';
import { migrationsBefore } from '../helpers/migrations.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { sumThreadUsage } from '../../src/db/charges.js';
import { finalizeScheduleRunOfThread } from '../../src/db/schedules.js';

const MIGRATIONS = readMigrationFiles({ migrationsFolder: defaultPgMigrationsFolder() }).length;

/** Rows every test needs: a project, a thread. Portable SQL: the same text runs on SQLite. */
const SEED = [
  "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'P', 1)",
  `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, idempotency_key, created_at)
   VALUES ('t1', 'k', 'project', 'p1', '{}', 'key-1', 1)`,
];

describe('Postgres migrations', () => {
  let db: TestDatabase;
  beforeEach(async () => {
    db = await createTestDatabase();
  });
  afterEach(async () => {
    await db.drop();
  });

  it('create every table of the schema with its column types; a second run applies nothing', async () => {
    expect(await applyPgMigrations(db.url)).toEqual({ applied: MIGRATIONS });
    const client = await connectPostgres(db.url);
    try {
      const { rows } = await client.query<{ table_name: string; column_name: string; data_type: string; is_nullable: string }>(
        // A column's collation is part of its type as the schema declares it (text is `COLLATE "C"`).
        `SELECT table_name, column_name, data_type || coalesce(' COLLATE "' || collation_name || '"', '') AS data_type, is_nullable
         FROM information_schema.columns
         WHERE table_schema = 'public' ORDER BY table_name, column_name`,
      );
      const expected = [...Object.values(pgSchemaTables), ...Object.values(pgScheduleTables)]
        .filter((v) => v instanceof PgTable)
        .flatMap((t) => {
          const c = getTableConfig(t);
          return c.columns.map((col) => ({
            table_name: c.name,
            column_name: col.name,
            data_type: col.getSQLType(),
            is_nullable: col.notNull ? 'NO' : 'YES',
          }));
        })
        .sort((a, b) => `${a.table_name}.${a.column_name}`.localeCompare(`${b.table_name}.${b.column_name}`));
      expect(rows).toEqual(expected);
    } finally {
      await client.end();
    }
    expect(await applyPgMigrations(db.url)).toEqual({ applied: 0 });
  });

  it('three daemons starting together: one migrates, the others wait and find nothing pending', async () => {
    const results = await Promise.all([applyPgMigrations(db.url), applyPgMigrations(db.url), applyPgMigrations(db.url)]);
    expect(results.map((r) => r.applied).sort()).toEqual([0, 0, MIGRATIONS]);
    const client = await connectPostgres(db.url);
    try {
      const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM drizzle.__drizzle_migrations');
      expect(Number(rows[0]!.n)).toBe(MIGRATIONS);
      // The hand-written migration ran exactly once: one head row, not one per daemon.
      expect((await client.query('SELECT seq, hash FROM llm_ledger_head')).rows).toEqual([{ seq: 0, hash: GENESIS_HASH }]);
    } finally {
      await client.end();
    }
  });

  it('0011 moves each call record onto its charge and names the applied answer on its mutation, as SQLite`s 0017', async () => {
    const dirs: string[] = [];
    try {
      await applyPgMigrations(db.url, migrationsBefore('0011_merge_call_records', dirs, 'migrations/pg'));
      const pool = openTestPool(db.url, 10);
      try {
        const sql = new PgSql(pool);
        for (const statement of OLD_HOME) await sql.run(statement);
        await applyPgMigrations(db.url);
        expect(await sql.all(EXPECTED_CHARGES_SQL)).toEqual(EXPECTED_CHARGES);
        expect(await sql.all('SELECT id, response_seq FROM mutations')).toEqual([{ id: 'm1', response_seq: 10 }]);
        expect(await sumThreadUsage(sql, 't1')).toMatchObject(EXPECTED_USAGE);
        expect(await sql.all("SELECT 1 FROM information_schema.tables WHERE table_name = 'llm_call_records'")).toEqual([]);
      } finally {
        await pool.end();
      }
    } finally {
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    }
  });

  it("0021: a schedule run's token sums over its thread and children pass 2^31-1 and are stored (bigint), as on SQLite", async () => {
    await applyPgMigrations(db.url);
    const client = await connectPostgres(db.url);
    try {
      const sql = new PgSql(client);
      for (const statement of SEED) await sql.run(statement);
      await sql.run(`INSERT INTO schedules (id, project_id, operation, cron, timezone, catch_up, status, active_from, created_at, updated_at)
        VALUES ('s1', 'p1', 'briefing', '0 9 * * *', 'UTC', 'latest', 'active', 1, 1, 1)`);
      await sql.run(`INSERT INTO schedule_runs (id, schedule_id, period_key, period_at, status, claim_owner, claimed_at, thread_id, created_at)
        VALUES ('r1', 's1', '2026-01-01T09:00:00.000Z', 1, 'pending', 'me', 1, 't1', 1)`);
      // Each count a token column holds (domain/completion.ts bounds it at 2^31-1); their sum does not fit an integer.
      const usage = { prompt_tokens: 2_000_000_000, completion_tokens: 1, total_tokens: 2_000_000_001 };
      await client.query('BEGIN');
      await appendLedgerEntries(
        sql,
        [1, 2].map((attempt) => ({ thread_id: 't1', work_item_id: null, entry_type: 'response' as const, attempt, payload: { usage }, created_at: 1 })),
      );
      await client.query('COMMIT');
      const [run] = await finalizeScheduleRunOfThread(sql, { thread_id: 't1', to: 'complete', now: 2, error_message: null });
      expect(run).toMatchObject({ status: 'complete', responses: 2, prompt_tokens: 4_000_000_000, completion_tokens: 2, total_tokens: 4_000_000_002 });
    } finally {
      await client.end();
    }
  });

  it('0016: a part whose content a build before part versions updates goes back to version 0 (read again); this build`s updates keep theirs', async () => {
    await applyPgMigrations(db.url);
    const client = await connectPostgres(db.url);
    try {
      await client.query("INSERT INTO projects (id, name, created_at) VALUES ('p1', 'P', 1)");
      await client.query(
        `INSERT INTO documents (id, project_id, doc_type, version, content, updated_at, parts_field, parts_key)
         VALUES ('d1', 'p1', 'backlog', 3, '{}', 1, 'epics', 'id')`,
      );
      await client.query("INSERT INTO document_parts (document_id, part_key, ord, content, version) VALUES ('d1', 'e1', 0, 'a', 3)");
      const versionOf = async () => (await client.query<{ version: number }>("SELECT version FROM document_parts WHERE part_key = 'e1'")).rows[0]!.version;
      // This build: content and version change together.
      await client.query("UPDATE document_parts SET content = 'b', version = 4 WHERE part_key = 'e1'");
      expect(await versionOf()).toBe(4);
      // A build before the column: the content alone.
      await client.query("UPDATE document_parts SET content = 'c' WHERE part_key = 'e1'");
      expect(await versionOf()).toBe(0);
    } finally {
      await client.end();
    }
  });
});

/** Appends one entry the way the storage layer will: lock the head, link to it, insert. */
async function appendEntry(client: pg.PoolClient | pg.Client, payload: string): Promise<LedgerRow> {
  const head = (await client.query<{ seq: number; hash: string }>('SELECT seq, hash FROM llm_ledger_head WHERE id = 1 FOR UPDATE')).rows[0]!;
  const row = { seq: head.seq + 1, thread_id: 't1', work_item_id: null, entry_type: 'prompt', attempt: null, payload, prev_hash: head.hash, created_at: 1 };
  const full = { ...row, hash: ledgerEntryHash(row) };
  await client.query(
    `INSERT INTO llm_ledger_entries (seq, thread_id, work_item_id, entry_type, attempt, payload, prev_hash, hash, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [full.seq, full.thread_id, full.work_item_id, full.entry_type, full.attempt, full.payload, full.prev_hash, full.hash, full.created_at],
  );
  return full;
}

describe('Postgres ledger triggers', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  let sqliteDir: string;
  let sqlite: Db;
  beforeAll(async () => {
    db = await createTestDatabase();
    await applyPgMigrations(db.url);
    pool = openTestPool(db.url, 8);
    for (const s of SEED) await pool.query(s);
    sqliteDir = mkdtempSync(join(tmpdir(), 'cmb-pg-parity-'));
    sqlite = openDatabase(join(sqliteDir, 'combine.db'));
    applyMigrations(sqlite);
    for (const s of SEED) sqlite.exec(s);
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
    sqlite.close();
    rmSync(sqliteDir, { recursive: true, force: true });
  });

  /** The error each backend gives for the same statement (null: it succeeded). */
  async function refusals(statement: string): Promise<{ pg: string | null; sqlite: string | null }> {
    const pgError = await pool.query(statement).then(
      () => null,
      (e: Error) => e.message,
    );
    let sqliteError: string | null = null;
    try {
      sqlite.exec(statement);
    } catch (e) {
      sqliteError = (e as Error).message;
    }
    return { pg: pgError, sqlite: sqliteError };
  }

  it('refuse UPDATE and DELETE of an entry with the same error as SQLite, and TRUNCATE too', async () => {
    const client = await pool.connect();
    try {
      await appendEntry(client, '{"n":1}');
    } finally {
      client.release();
    }
    const e = await pool.query<LedgerRow>('SELECT * FROM llm_ledger_entries WHERE seq = 1');
    sqlite
      .prepare(
        `INSERT INTO llm_ledger_entries (seq, thread_id, work_item_id, entry_type, attempt, payload, prev_hash, hash, created_at)
         VALUES (@seq, @thread_id, @work_item_id, @entry_type, @attempt, @payload, @prev_hash, @hash, @created_at)`,
      )
      .run(e.rows[0]);

    const update = await refusals(`UPDATE llm_ledger_entries SET payload = '{"n":2}' WHERE seq = 1`);
    expect(update.sqlite).toBe('llm_ledger_entries is append-only: UPDATE refused');
    expect(update.pg).toBe(update.sqlite);
    const del = await refusals('DELETE FROM llm_ledger_entries WHERE seq = 1');
    expect(del.sqlite).toMatch(/^llm_ledger_entries is append-only: DELETE refused/);
    expect(del.pg).toBe(del.sqlite);
    await expect(pool.query('TRUNCATE llm_ledger_entries CASCADE')).rejects.toThrow('llm_ledger_entries is append-only: TRUNCATE refused');
    expect((await pool.query('SELECT payload FROM llm_ledger_entries WHERE seq = 1')).rows).toEqual([{ payload: '{"n":1}' }]);
  });

  it('refuse an entry that does not link to the chain head, and any move of the head but an append', async () => {
    const head = (await pool.query<{ seq: number; hash: string }>('SELECT seq, hash FROM llm_ledger_head')).rows[0]!;
    const insert = (seq: number, prevHash: string) =>
      pool.query(
        `INSERT INTO llm_ledger_entries (seq, thread_id, entry_type, payload, prev_hash, hash, created_at)
         VALUES ($1, 't1', 'prompt', '{}', $2, 'x', 1)`,
        [seq, prevHash],
      );
    await expect(insert(head.seq + 2, head.hash)).rejects.toThrow('does not link to the chain head');
    await expect(insert(head.seq + 1, GENESIS_HASH)).rejects.toThrow('does not link to the chain head');
    await expect(insert(head.seq, head.hash)).rejects.toThrow('does not link to the chain head');
    await expect(pool.query('UPDATE llm_ledger_head SET seq = 0')).rejects.toThrow('llm_ledger_head moves only when an entry is appended');
    await expect(pool.query('DELETE FROM llm_ledger_head')).rejects.toThrow('llm_ledger_head moves only when an entry is appended');
    await expect(pool.query('TRUNCATE llm_ledger_head')).rejects.toThrow('llm_ledger_head moves only when an entry is appended');
    expect((await pool.query('SELECT seq, hash FROM llm_ledger_head')).rows).toEqual([head]);
  });

  it('concurrent appenders from many sessions extend one chain with no fork and no gap', async () => {
    const before = (await pool.query<{ seq: number; hash: string }>('SELECT seq, hash FROM llm_ledger_head')).rows[0]!;
    const appender = async (who: number) => {
      for (let i = 0; i < 25; i++) {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          await appendEntry(client, JSON.stringify({ who, i }));
          await client.query('COMMIT');
        } finally {
          client.release();
        }
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5].map(appender));
    const { rows } = await pool.query<LedgerRow>('SELECT * FROM llm_ledger_entries WHERE seq > $1 ORDER BY seq', [before.seq]);
    expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 150 }, (_, i) => before.seq + 1 + i));
    expect(findChainBreak(rows, before.hash)).toBeNull();
    expect((await pool.query('SELECT seq, hash FROM llm_ledger_head')).rows).toEqual([{ seq: rows.at(-1)!.seq, hash: rows.at(-1)!.hash }]);
  });

  it('an append through llm_ledger_append skips the guards for its own rows only: a direct INSERT after it, in the same transaction, is checked and moves the head', async () => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      const [appended] = await appendLedgerEntries(new PgSql(client), [
        { thread_id: 't1', work_item_id: null, entry_type: 'prompt', attempt: 1, payload: { n: 'function' }, created_at: 1 },
      ]);
      expect((await client.query("SELECT current_setting('combine.ledger_append', true) AS s")).rows).toEqual([{ s: 'off' }]);
      expect((await client.query('SELECT seq, hash FROM llm_ledger_head')).rows).toEqual([{ seq: appended!.seq, hash: appended!.hash }]);
      await client.query('SAVEPOINT s');
      await expect(
        client.query(
          `INSERT INTO llm_ledger_entries (seq, thread_id, entry_type, payload, prev_hash, hash, created_at) VALUES ($1, 't1', 'prompt', '{}', $2, 'x', 1)`,
          [appended!.seq + 1, GENESIS_HASH],
        ),
      ).rejects.toThrow('does not link to the chain head');
      await client.query('ROLLBACK TO SAVEPOINT s');
      await expect(client.query('UPDATE llm_ledger_head SET seq = seq')).rejects.toThrow('llm_ledger_head moves only when an entry is appended');
      await client.query('ROLLBACK TO SAVEPOINT s');
      const direct = await appendEntry(client, '{"n":"direct"}');
      expect(direct.prev_hash).toBe(appended!.hash);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    const rows = (await pool.query<LedgerRow>('SELECT * FROM llm_ledger_entries ORDER BY seq')).rows;
    expect(findChainBreak(rows, GENESIS_HASH)).toBeNull();
    expect((await pool.query('SELECT seq, hash FROM llm_ledger_head')).rows).toEqual([{ seq: rows.at(-1)!.seq, hash: rows.at(-1)!.hash }]);
  });

  it('delete only entries a checkpoint covers; checkpoints must match their entries and are append-only', async () => {
    const entries = (await pool.query<LedgerRow>('SELECT * FROM llm_ledger_entries ORDER BY seq LIMIT 3')).rows;
    const [first, , third] = entries;
    const checkpoint = (hashBefore: string, hashAfter: string) =>
      pool.query(
        `INSERT INTO llm_ledger_checkpoints (from_seq, to_seq, hash_before, hash_after, prune_id, cutoff_at, created_at)
         VALUES ($1, $2, $3, $4, 'prune-1', 1, 1)`,
        [first!.seq, first!.seq + 1, hashBefore, hashAfter],
      );
    await expect(checkpoint(first!.prev_hash, third!.hash)).rejects.toThrow('a ledger checkpoint must describe a run of entries that exist');
    await checkpoint(first!.prev_hash, entries[1]!.hash);
    // Covered entries may go (this is how `combine prune` removes them); the next one may not.
    expect((await pool.query('DELETE FROM llm_ledger_entries WHERE seq <= $1', [first!.seq + 1])).rowCount).toBe(2);
    await expect(pool.query('DELETE FROM llm_ledger_entries WHERE seq = $1', [third!.seq])).rejects.toThrow('DELETE refused');
    await expect(pool.query("UPDATE llm_ledger_checkpoints SET prune_id = 'x'")).rejects.toThrow('llm_ledger_checkpoints is append-only: UPDATE refused');
    await expect(pool.query('DELETE FROM llm_ledger_checkpoints')).rejects.toThrow('llm_ledger_checkpoints is append-only: DELETE refused');
    await expect(pool.query('TRUNCATE llm_ledger_checkpoints')).rejects.toThrow('llm_ledger_checkpoints is append-only: TRUNCATE refused');
  });
});

describe('Postgres queue depth', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  beforeEach(async () => {
    db = await createTestDatabase();
    await applyPgMigrations(db.url);
    pool = openTestPool(db.url, 8);
    for (const s of SEED) await pool.query(s);
  });
  afterEach(async () => {
    await pool.end();
    await db.drop();
  });

  /** The queue-depth slots held in this test's database (pg_locks spans the server's other test databases). */
  const heldSlots = async () =>
    Number(
      (
        await pool.query(
          "SELECT count(DISTINCT objid) AS n FROM pg_locks WHERE locktype = 'advisory' AND classid = 1668112996 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
      ).rows[0].n,
    );
  const pgDepth = async () => Number((await pool.query('SELECT coalesce(sum(queued), 0) AS n FROM llm_queue_depth')).rows[0].n);
  const pgQueued = async () => Number((await pool.query("SELECT count(*) AS n FROM llm_work_items WHERE status = 'queued'")).rows[0].n);
  const item = (id: string, seq: number, status = 'queued') =>
    `INSERT INTO llm_work_items (id, thread_id, sequence, status, lock_scope, not_before, created_at)
     VALUES ('${id}', 't1', ${seq}, '${status}', 'epic:e', 0, 1)`;

  it('equals the queued count after every step, as SQLite`s bookkeeping does for the same statements', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cmb-pg-depth-'));
    const sqlite = openDatabase(join(dir, 'combine.db'));
    try {
      applyMigrations(sqlite);
      for (const s of SEED) sqlite.exec(s);
      const steps = [
        item('w1', 1),
        item('w2', 2),
        item('w3', 3, 'claimed'),
        // A multi-row insert: one statement, several queued rows.
        `INSERT INTO llm_work_items (id, thread_id, sequence, lock_scope, not_before, created_at)
         VALUES ('w4', 't1', 4, 'epic:e', 0, 1), ('w5', 't1', 5, 'epic:e', 0, 1), ('w6', 't1', 6, 'epic:e', 0, 1)`,
        "UPDATE llm_work_items SET status = 'claimed' WHERE id IN ('w1', 'w2')",
        "UPDATE llm_work_items SET status = 'running' WHERE id = 'w1'",
        // Not a status change: the depth must not move.
        "UPDATE llm_work_items SET not_before = 5 WHERE status = 'queued'",
        "UPDATE llm_work_items SET status = 'queued' WHERE id IN ('w1', 'w3')",
        // queued → queued (a requeue rewriting the status to the same value) counts nothing.
        "UPDATE llm_work_items SET status = 'queued', attempt = attempt + 1 WHERE id = 'w1'",
        // Not queued before nor after: nothing to count.
        "UPDATE llm_work_items SET status = 'applied', lease_owner = 'd' WHERE id = 'w2'",
        // One statement moving rows both ways: each row counts its own move.
        "UPDATE llm_work_items SET status = CASE WHEN status = 'queued' THEN 'claimed' ELSE 'queued' END WHERE id IN ('w1', 'w2', 'w5', 'w6')",
        "DELETE FROM llm_work_items WHERE id = 'w1'",
        "DELETE FROM llm_work_items WHERE id IN ('w4', 'w2')",
        "UPDATE llm_work_items SET status = 'dead_letter' WHERE status = 'queued'",
      ];
      for (const step of steps) {
        await pool.query(step);
        sqlite.exec(step);
        const sqliteDepth = (sqlite.prepare('SELECT queued FROM llm_queue_depth WHERE id = 1').get() as { queued: number }).queued;
        const sqliteQueued = (sqlite.prepare("SELECT count(*) AS n FROM llm_work_items WHERE status = 'queued'").get() as { n: number }).n;
        expect({ step, pg: await pgDepth(), queued: await pgQueued() }).toEqual({ step, pg: sqliteDepth, queued: sqliteQueued });
        expect(sqliteDepth).toBe(sqliteQueued);
      }
    } finally {
      sqlite.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an INSERT of many queued items adds them to its shard in one update (0023), not one per row', async () => {
    // generate-all inserts an orchestration's children in one statement: 480 shard updates per statement before
    // 0023, each behind all the others' versions of the same row in the same transaction.
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(
        `INSERT INTO llm_work_items (id, thread_id, sequence, status, lock_scope, not_before, created_at)
         SELECT 'many-' || g, 't1', 10 + g, CASE WHEN g = 1 THEN 'claimed' ELSE 'queued' END, 'epic:e', 0, 1 FROM generate_series(1, 40) AS g`,
      );
      const shardWrites = await client.query("SELECT n_tup_ins + n_tup_upd AS n FROM pg_stat_xact_user_tables WHERE relname = 'llm_queue_depth'");
      expect(Number(shardWrites.rows[0].n)).toBe(1);
      await client.query('COMMIT');
    } finally {
      client.release();
    }
    expect(await pgDepth()).toBe(39);
    expect(await pgQueued()).toBe(39);
  });

  it('stays exact under concurrent enqueue, claim, requeue and rolled-back transactions, without deadlocks', async () => {
    const worker = async (w: number) => {
      for (let i = 0; i < 40; i++) {
        const client = await pool.connect();
        try {
          await client.query('BEGIN');
          const id = `c${w}-${i}`;
          await client.query(item(id, 100 + w * 1000 + i));
          if (i % 3 === 0) await client.query(item(`${id}-b`, 500 + w * 1000 + i));
          // Claim a queued item, as a claimer would (SKIP LOCKED: never wait for another's rows).
          await client.query(
            `UPDATE llm_work_items SET status = 'claimed' WHERE id IN (
               SELECT id FROM llm_work_items WHERE status = 'queued' ORDER BY not_before LIMIT 1 FOR UPDATE SKIP LOCKED)`,
          );
          if (i % 4 === 0) {
            await client.query(
              `UPDATE llm_work_items SET status = 'queued' WHERE id IN (
                 SELECT id FROM llm_work_items WHERE status = 'claimed' LIMIT 1 FOR UPDATE SKIP LOCKED)`,
            );
          }
          await client.query(i % 5 === 0 ? 'ROLLBACK' : 'COMMIT');
        } finally {
          client.release();
        }
      }
    };
    await Promise.all([0, 1, 2, 3, 4, 5].map(worker));
    const queued = await pgQueued();
    expect(queued).toBeGreaterThan(0);
    expect(await pgDepth()).toBe(queued);
    // The sessions counted into shards of their own: no single counter row all of them waited on.
    expect(Number((await pool.query('SELECT count(*) AS n FROM llm_queue_depth WHERE queued <> 0')).rows[0].n)).toBeGreaterThan(1);
  });

  it('a session never waits for another session`s shard: 17 open transactions each queue an item at once', async () => {
    // With shards by pg_backend_pid() % 16, two of 17 sessions always shared one: the second one's
    // INSERT waited for the first's COMMIT (lock_timeout ends that wait with an error here).
    const sessions = await Promise.all(Array.from({ length: 17 }, () => connectPostgres(db.url)));
    try {
      for (const [i, s] of sessions.entries()) {
        await s.query("SET lock_timeout = '5s'");
        await s.query('BEGIN');
        await s.query(item(`open-${i}`, 2000 + i));
      }
      for (const s of sessions) await s.query('COMMIT');
      expect(await pgDepth()).toBe(17);
      expect(await pgQueued()).toBe(17);
      // Each session holds its slot until it ends; a session that ends frees it for the next one.
      expect(await heldSlots()).toBe(17);
    } finally {
      await Promise.all(sessions.map((s) => s.end()));
    }
  });

  it('past 64 sessions a session still gets a shard of its own, its row made on first use', async () => {
    // One session holds slots 0–63 (as 64 sessions would): the next two scan on and take 64 and 65.
    const holder = await connectPostgres(db.url);
    const sessions = await Promise.all([0, 1].map(() => connectPostgres(db.url)));
    try {
      const held = await holder.query('SELECT count(*) FILTER (WHERE pg_try_advisory_lock(1668112996, g)) AS n FROM generate_series(0, 63) AS g');
      expect(Number(held.rows[0].n)).toBe(64);
      for (const [i, s] of sessions.entries()) {
        await s.query("SET lock_timeout = '5s'");
        await s.query('BEGIN');
        await s.query(item(`past-64-${i}`, 3000 + i));
      }
      for (const s of sessions) await s.query('COMMIT');
      const rows = await pool.query('SELECT id, queued FROM llm_queue_depth WHERE id >= 64 ORDER BY id');
      expect(rows.rows.map((r) => [Number(r.id), Number(r.queued)])).toEqual([
        [64, 1],
        [65, 1],
      ]);
      expect(await pgDepth()).toBe(await pgQueued());
      expect(await heldSlots()).toBe(66);
    } finally {
      await Promise.all([holder, ...sessions].map((s) => s.end()));
    }
  });
});

describe('Postgres status checks', () => {
  let db: TestDatabase;
  let pool: pg.Pool;
  let sqliteDir: string;
  let sqlite: Db;
  /** One row of each table with a status column, in a valid state. Portable SQL. */
  const rows = [
    "INSERT INTO llm_work_items (id, thread_id, sequence, lock_scope, not_before, created_at) VALUES ('w1', 't1', 1, 'epic:e', 0, 1)",
    `INSERT INTO llm_charges (id, work_item_id, thread_id, project_id, model, attempt, repair, status, day, reserved_tokens, reserved_cost_usd, created_at)
     VALUES ('c1', 'w1', 't1', 'p1', 'm', 1, 0, 'reserved', '2026-01-01', 10, 0.5, 1)`,
    `INSERT INTO schedules (id, project_id, operation, cron, timezone, catch_up, status, active_from, created_at, updated_at)
     VALUES ('s1', 'p1', 'briefing', '0 9 * * *', 'UTC', 'latest', 'active', 1, 1, 1)`,
    `INSERT INTO schedule_runs (id, schedule_id, period_key, period_at, status, claim_owner, claimed_at, created_at)
     VALUES ('r1', 's1', '2026-01-01T09:00:00.000Z', 1, 'pending', 'me', 1, 1)`,
  ];
  const machines = [
    { table: 'llm_threads', id: 't1', statuses: THREAD_STATUSES },
    { table: 'llm_work_items', id: 'w1', statuses: WORK_ITEM_STATUSES },
    { table: 'llm_charges', id: 'c1', statuses: CHARGE_STATUSES },
    { table: 'schedules', id: 's1', statuses: SCHEDULE_STATUSES },
    { table: 'schedule_runs', id: 'r1', statuses: RUN_STATUSES },
  ];
  /** Every state of every machine, and values of none. */
  const candidates = [...new Set([...THREAD_STATUSES, ...WORK_ITEM_STATUSES, ...CHARGE_STATUSES, ...SCHEDULE_STATUSES, ...RUN_STATUSES, 'done', '', 'QUEUED'])];

  beforeAll(async () => {
    db = await createTestDatabase();
    await applyPgMigrations(db.url);
    pool = openTestPool(db.url, 2);
    sqliteDir = mkdtempSync(join(tmpdir(), 'cmb-pg-status-'));
    sqlite = openDatabase(join(sqliteDir, 'combine.db'));
    applyMigrations(sqlite);
    for (const s of [...SEED, ...rows]) {
      await pool.query(s);
      sqlite.exec(s);
    }
  });
  afterAll(async () => {
    await pool.end();
    await db.drop();
    sqlite.close();
    rmSync(sqliteDir, { recursive: true, force: true });
  });

  it.each(machines)('$table: Postgres accepts exactly the status values SQLite accepts, the states of its machine', async ({ table, id, statuses }) => {
    const accepted = { pg: [] as string[], sqlite: [] as string[] };
    for (const status of candidates) {
      const update = `UPDATE ${table} SET status = '${status}' WHERE id = '${id}'`;
      const pgOk = await pool.query(update).then(
        () => true,
        (e: Error) => {
          expect(e.message).toContain(`violates check constraint "${table}_status_check"`);
          return false;
        },
      );
      if (pgOk) accepted.pg.push(status);
      try {
        sqlite.exec(update);
        accepted.sqlite.push(status);
      } catch (e) {
        expect((e as Error).message).toBe(`CHECK constraint failed: ${table}.status`);
      }
    }
    expect(accepted.pg).toEqual(accepted.sqlite);
    expect([...accepted.pg].sort()).toEqual([...statuses].sort());
  });

  it('refuse a row inserted with a status outside its machine', async () => {
    const insert =
      "INSERT INTO schedules (id, project_id, operation, cron, timezone, catch_up, status, active_from, created_at, updated_at) VALUES ('s2', 'p1', 'briefing', '* * * * *', 'UTC', 'skip', 'deleted', 1, 1, 1)";
    await expect(pool.query(insert)).rejects.toThrow('violates check constraint "schedules_status_check"');
    expect(() => sqlite.exec(insert)).toThrow('CHECK constraint failed: schedules.status');
    expect((await pool.query("SELECT count(*) AS n FROM schedules WHERE id = 's2'")).rows).toEqual([{ n: 0 }]);
  });
});
