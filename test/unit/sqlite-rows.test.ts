/**
 * The SQLite handle reads rows as arrays and makes each row object itself (db/statements.ts): what a
 * query function gets must be exactly the object better-sqlite3 makes — every column, its name, its
 * value and type, a later column of the same name winning — also after a schema change re-expands a
 * `*`, and for a column whose name is special to object literals.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { SqliteSql } from '../../src/db/sql.js';

let dir: string;
let db: Db;
let sql: SqliteSql;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cmb-rows-'));
  db = openDatabase(join(dir, 'rows.db'));
  sql = new SqliteSql(db);
  db.exec(`CREATE TABLE t (id TEXT PRIMARY KEY, n INTEGER, r REAL, b BLOB, z TEXT);
           CREATE TABLE u (id TEXT PRIMARY KEY, t_id TEXT, note TEXT);
           INSERT INTO t VALUES ('a', 9007199254740991, 1.5, x'00ff', NULL), ('b', -3, 0, x'', 'x');
           INSERT INTO u VALUES ('u1', 'a', 'first'), ('u2', 'b', 'second');`);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** better-sqlite3's own row objects for the same statement (a fresh, non-raw statement). */
const native = (text: string, params: unknown[] = []) => db.prepare(text).all(...params);

describe('row objects read through the SQLite handle', () => {
  it('equal better-sqlite3 row objects: names, values, types, key order, duplicate names', async () => {
    const texts = [
      'SELECT * FROM t ORDER BY id',
      'SELECT t.*, u.* FROM t JOIN u ON u.t_id = t.id ORDER BY t.id', // `id` twice: the later (u.id) wins
      'SELECT count(*) AS n, max(r) FROM t',
      `SELECT id AS "we'ird ""name\\", n + 1 AS "n+1" FROM t ORDER BY id`, // quotes and a backslash in a column name
    ];
    for (const text of texts) {
      const rows = await sql.all(text);
      expect(rows).toEqual(native(text));
      expect(rows.map((r) => Object.keys(r as object))).toEqual(native(text).map((r) => Object.keys(r as object)));
      expect(await sql.get(text)).toEqual(native(text)[0]);
    }
    expect(await sql.get('SELECT * FROM t WHERE id = ?', ['none'])).toBeUndefined();
    expect(await sql.all('SELECT * FROM t WHERE id = ?', ['none'])).toEqual([]);
  });

  it('a RETURNING statement through get, and run on a statement that returns rows', async () => {
    expect(await sql.get("UPDATE t SET z = 'y' WHERE id = ? RETURNING id, z", ['a'])).toEqual({ id: 'a', z: 'y' });
    expect(await sql.run("UPDATE t SET z = 'w' WHERE id = ? RETURNING id", ['b'])).toEqual({ changes: 1 });
    expect(native('SELECT z FROM t ORDER BY id')).toEqual([{ z: 'y' }, { z: 'w' }]);
  });

  it('a column added after a `SELECT *` was prepared is in its next rows', async () => {
    expect(await sql.get("SELECT * FROM u WHERE id = 'u1'")).toEqual({ id: 'u1', t_id: 'a', note: 'first' });
    db.exec("ALTER TABLE u ADD COLUMN extra TEXT DEFAULT 'e'");
    expect(await sql.get("SELECT * FROM u WHERE id = 'u1'")).toEqual({ id: 'u1', t_id: 'a', note: 'first', extra: 'e' });
  });

  it('a column named __proto__ is an own property, as better-sqlite3 makes it, not the prototype', async () => {
    const row = (await sql.get<Record<string, unknown>>('SELECT 1 AS __proto__, 2 AS b')) as Record<string, unknown>;
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(row, '__proto__')?.value).toBe(1);
    expect(row.b).toBe(2);
  });
});
