/**
 * Text compares byte-wise on Postgres as on SQLite, whatever the database's collation (issue 18): every
 * text column is `COLLATE "C"` (src/db/pg/schema.ts). On a database created with the ICU `en-US`
 * collation — which sorts 'B' after 'ab' and puts 'Ab1' inside the prefix range of 'ab' — id prefix
 * lookups (db/id-prefix.ts) and `ORDER BY` on text keys return exactly what they return on SQLite.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { openDatabase } from '../../src/db/connection.js';
import { findScheduleIdsByPrefix } from '../../src/db/id-prefix.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { getLatestKeyedDocument, listDocumentHeads } from '../../src/db/projects.js';
import { SqliteSql } from '../../src/db/sql.js';
import { openTestPool } from '../helpers/postgres.js';

const NAME = `combine_test_icu_${process.pid}`;
const KEYS = ['B', 'a', 'a-c', 'ab', 'Ab1', 'ab2', 'a-b3', 'AB4'];

async function admin(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: inject('postgresAdminUrl') });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** A project whose documents and schedules are keyed by KEYS, through the same statements on both backends. */
async function seed(sql: Sql): Promise<void> {
  await sql.run("INSERT INTO projects (id, name, created_at) VALUES ('p', 'P', 0)");
  for (const [i, key] of KEYS.entries()) {
    await sql.run("INSERT INTO documents (id, project_id, doc_type, doc_key, version, content, updated_at) VALUES (?, 'p', 'briefing', ?, 1, '{}', 0)", [
      `d${i}`,
      key,
    ]);
    await sql.run(
      `INSERT INTO schedules (id, project_id, operation, cron, timezone, catch_up, status, active_from, created_at, updated_at)
       VALUES (?, 'p', 'briefing', '0 9 * * *', 'UTC', 'latest', 'active', 0, 0, 0)`,
      [key],
    );
  }
}

describe('text collation on a Postgres database that is not C', () => {
  let pool: pg.Pool;
  let postgres: Sql;
  let sqlite: Sql;
  let dir: string;
  let closeSqlite: () => void;

  beforeAll(async () => {
    await admin(`CREATE DATABASE ${NAME} LOCALE_PROVIDER icu ICU_LOCALE 'en-US' TEMPLATE template0`);
    const url = new URL(inject('postgresAdminUrl'));
    url.pathname = `/${NAME}`;
    await applyPgMigrations(url.toString());
    pool = openTestPool(url.toString(), 2);
    postgres = new PgSql(pool);
    dir = mkdtempSync(join(tmpdir(), 'cmb-collation-'));
    const db = openDatabase(join(dir, 'combine.db'));
    applyMigrations(db);
    sqlite = new SqliteSql(db);
    closeSqlite = () => db.close();
    await seed(postgres);
    await seed(sqlite);
  });
  afterAll(async () => {
    await pool?.end();
    closeSqlite?.();
    rmSync(dir, { recursive: true, force: true });
    await admin(`DROP DATABASE IF EXISTS ${NAME} WITH (FORCE)`);
  });

  it('the database itself sorts by en-US rules, not by bytes (so the test means something)', async () => {
    const rows = await postgres.all<{ k: string }>(`SELECT k FROM (VALUES ${KEYS.map((k) => `('${k}')`).join(', ')}) v(k) ORDER BY k`);
    expect(rows.map((r) => r.k)).not.toEqual([...KEYS].sort());
  });

  it('orders document keys as SQLite does: byte-wise', async () => {
    const heads = async (sql: Sql) => (await listDocumentHeads(sql, 'p', 100)).map((d) => d.doc_key);
    expect(await heads(postgres)).toEqual(await heads(sqlite));
    expect(await heads(postgres)).toEqual([...KEYS].sort().reverse());
    expect((await getLatestKeyedDocument(postgres, 'p', 'briefing'))?.doc_key).toBe((await getLatestKeyedDocument(sqlite, 'p', 'briefing'))?.doc_key);
  });

  it('finds ids by prefix as SQLite does: the typed text, byte for byte', async () => {
    for (const typed of ['ab', 'a', 'A', 'a-', 'B']) {
      const range = { lo: typed, hi: typed.slice(0, -1) + String.fromCharCode(typed.charCodeAt(typed.length - 1) + 1) };
      const found = await findScheduleIdsByPrefix(postgres, range, 100);
      expect(found, typed).toEqual(await findScheduleIdsByPrefix(sqlite, range, 100));
      expect(found, typed).toEqual(KEYS.filter((k) => k.startsWith(typed)).sort());
    }
  });
});
