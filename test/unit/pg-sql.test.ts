/**
 * The `Sql` handle over Postgres (src/db/pg/sql.ts), on the run's real Postgres: statement texts written
 * for better-sqlite3 run unchanged, and rows come back as SQLite gives them — the same text run on a
 * SQLite file and on Postgres returns equal rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { inlineList, quoteLiteral } from '../../src/db/pg/commit-query.js';
import { compileStatement, PgSql } from '../../src/db/pg/sql.js';
import { SqliteSql } from '../../src/db/sql.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';

describe('compiling statement texts for Postgres', () => {
  it('numbers @name parameters in order of first use, reusing a repeated one', () => {
    const s = compileStatement('UPDATE t SET a = @a, b = @b WHERE id = @id AND a <> @a');
    expect(s.text).toBe('UPDATE t SET a = $1, b = $2 WHERE id = $3 AND a <> $1');
    expect(s.names).toEqual(['a', 'b', 'id']);
    expect(s.name).toMatch(/^combine_\d+$/);
  });

  it('numbers ? parameters by position', () => {
    const s = compileStatement('SELECT * FROM t WHERE a = ? AND b IN (?, ?)');
    expect(s.text).toBe('SELECT * FROM t WHERE a = $1 AND b IN ($2, $3)');
    expect(s.names).toBeNull();
    expect(s.count).toBe(3);
  });

  it('leaves string literals, quoted identifiers, comments and casts alone', () => {
    const s = compileStatement(`SELECT 'it''s @x?' AS "a@b?", c::text -- why @y?
      /* @z ? */ FROM t WHERE d = @d`);
    expect(s.text).toBe(`SELECT 'it''s @x?' AS "a@b?", c::text -- why @y?
      /* @z ? */ FROM t WHERE d = $1`);
    expect(s.names).toEqual(['d']);
  });

  it("drops SQLite's INDEXED BY hints, and only them", () => {
    const s = compileStatement(`UPDATE w INDEXED BY idx_fair SET x = 1 WHERE id IN (SELECT id FROM w indexed  by idx_claimable) AND note <> 'INDEXED BY idx'`);
    expect(s.text).toBe(`UPDATE w  SET x = 1 WHERE id IN (SELECT id FROM w ) AND note <> 'INDEXED BY idx'`);
    expect(compileStatement('SELECT reindexed BY_x FROM t').text).toBe('SELECT reindexed BY_x FROM t');
  });

  it('compiles a text once', () => {
    expect(compileStatement('SELECT @once')).toBe(compileStatement('SELECT @once'));
  });

  it('refuses a text mixing both styles', () => {
    expect(() => compileStatement('SELECT * FROM t WHERE a = ? AND b = @b')).toThrow(/mixes @name and \?/);
  });
});

describe('PgSql on a real Postgres', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let pgSql: Sql;
  let dir: string;
  let db: Db;
  let sqlite: Sql;

  const TABLE = `CREATE TABLE t (id TEXT PRIMARY KEY, at BIGINT NOT NULL, n INTEGER NOT NULL, cost DOUBLE PRECISION, note TEXT)`;
  const ROWS = [
    { id: 'a', at: 1_700_000_000_123, n: 3, cost: 0.25, note: null },
    { id: 'b', at: 1_700_000_000_456, n: 4, cost: null, note: 'x' },
  ];

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = openTestPool(database.url, 2);
    pgSql = new PgSql(pool);
    dir = mkdtempSync(join(tmpdir(), 'cmb-pgsql-'));
    db = openDatabase(join(dir, 'parity.db'));
    sqlite = new SqliteSql(db);
    for (const sql of [pgSql, sqlite]) {
      await sql.run(TABLE);
      for (const row of ROWS) await sql.run('INSERT INTO t (id, at, n, cost, note) VALUES (@id, @at, @n, @cost, @note)', row);
    }
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('returns the rows SQLite returns for the same text: integers, bigints, counts, sums, booleans, nulls', async () => {
    const queries: [string, unknown?][] = [
      ['SELECT * FROM t ORDER BY id'],
      ['SELECT * FROM t WHERE id = ?', ['b']],
      ['SELECT count(*) AS n, sum(at) AS total_at, sum(n) AS total_n, max(cost) AS cost FROM t'],
      ['SELECT id, note IS NULL AS no_note, EXISTS (SELECT 1 FROM t u WHERE u.n > t.n) AS smaller FROM t ORDER BY id'],
      ['SELECT coalesce(sum(n), 0) AS n FROM t WHERE at > @after', { after: 2_000_000_000_000 }],
    ];
    for (const [text, params] of queries) {
      const fromSqlite = await sqlite.all(text, params as never);
      expect(await pgSql.all(text, params as never), text).toEqual(fromSqlite);
    }
    expect(await pgSql.get('SELECT * FROM t WHERE id = @id', { id: 'nope' })).toBeUndefined();
  });

  it('reports the rows a statement changed, as a guarded update checks them', async () => {
    expect(await pgSql.run('UPDATE t SET n = n + 1 WHERE id = @id AND n = @n', { id: 'a', n: 3 })).toEqual({ changes: 1 });
    expect(await pgSql.run('UPDATE t SET n = n + 1 WHERE id = @id AND n = @n', { id: 'a', n: 3 })).toEqual({ changes: 0 });
    expect(await pgSql.run('UPDATE t SET n = n - 1 WHERE id = ?', ['a'])).toEqual({ changes: 1 });
  });

  it('refuses a missing parameter or a wrong count, as better-sqlite3 does, before sending anything', async () => {
    await expect(pgSql.get('SELECT * FROM t WHERE id = @id AND n = @n', { id: 'a' })).rejects.toThrow(/missing named parameter "n"/);
    await expect(pgSql.get('SELECT * FROM t WHERE id = ?', [])).rejects.toThrow(/expects 1 positional/);
    await expect(sqlite.get('SELECT * FROM t WHERE id = @id AND n = @n', { id: 'a' })).rejects.toThrow();
  });

  it("gives the driver's own rows for a statement run again on a connection (its columns read once), and a failed parse fails the query", async () => {
    const text = `SELECT t.id, t.at, t.n, t.cost, t.note, t.n > 3 AS big, count(*) OVER () AS n_all, t.id AS n, NULL::text AS gone FROM t WHERE t.at > @after ORDER BY t.id`;
    const s = compileStatement(text);
    const driver = await pool.query({ text: s.text, values: [0] });
    for (let i = 0; i < 4; i++) expect(await pgSql.all(text, { after: 0 })).toEqual(driver.rows);
    // A value its connection's parser refuses fails the query, and the connection goes on.
    const refusing = new pg.Client({
      connectionString: database.url,
      types: {
        getTypeParser: ((oid: number, format: string) =>
          oid === 25
            ? () => {
                throw new Error('refused');
              }
            : pg.types.getTypeParser(oid, format as 'text')) as never,
      },
    });
    await refusing.connect();
    try {
      await expect(new PgSql(refusing).all(text, { after: 0 })).rejects.toThrow('refused');
      expect(await new PgSql(refusing).get('SELECT 1 AS one')).toEqual({ one: 1 });
    } finally {
      await refusing.end();
    }
  });

  it('quotes a literal that the server reads back as the same text, the dollar-quote tag in it too', async () => {
    const texts = ['', 'plain', "it's", 'a\\b', "both ' and \\", '{"s":"say \\"hi\\"\\n"}', "''\\\\''", 'é ✓ \u{1F600}', "E'x'"];
    // Values holding the tag, or ending where the closing tag would complete it, and other dollars.
    const dollars = ['$lit$', "it's $lit$ here", 'a\\b$lit', "x'$lit", "'$li", "'$", "'$$", "'$$lit$$", "$lit$'$lit$", "'$1"];
    for (const text of [...texts, ...dollars]) {
      const { rows } = await pool.query<{ v: string; w: string }>(`SELECT ${quoteLiteral(text)}::text AS v, lower(${quoteLiteral(text)}) AS w`);
      expect(rows[0], text).toEqual({ v: text, w: text.toLowerCase() });
    }
    // Plain values go in as escapeLiteral writes them; the others whole, without an escape.
    expect(quoteLiteral('plain')).toBe(pg.escapeLiteral('plain'));
    const json = '{"s":"a\\"b"}';
    expect(quoteLiteral(json)).toBe(` $lit$${json}$lit$`);
  });

  it('inlines an array of texts that the server reads back element for element', async () => {
    const elements = [
      '',
      'plain',
      'a"b',
      'a\\b',
      "it's",
      '{"kind":"x","data":{"s":"q\\"\\\\"}}',
      'NULL',
      'é ✓',
      '"',
      '\\',
      '"\\"',
      'x$lit',
      '$lit$',
      'two\nlines "q" \\',
      '\t\u0001"',
      '\u{1F600} "smile"',
    ];
    const { rows } = await pool.query<{ v: string[] }>(`SELECT (${inlineList([elements])})::text[] AS v`);
    expect(rows[0]!.v).toEqual(elements);
  });

  it("inlines an array's null elements as NULL, apart from the text 'NULL' and the empty text", async () => {
    const elements = ['a', null, 'NULL', '', null];
    const { rows } = await pool.query<{ v: (string | null)[] }>(`SELECT (${inlineList([elements])})::text[] AS v`);
    expect(rows[0]!.v).toEqual(elements);
  });

  it('reads a statement run again on its connection as its first run, without the server describing its rows again', async () => {
    const client = await pool.connect();
    const described: string[] = [];
    const onDescription = (msg: { fields: { name: string }[] }) => described.push(msg.fields.map((f) => f.name).join(','));
    const connection = (client as unknown as { connection: { on(e: string, f: typeof onDescription): void; off(e: string, f: typeof onDescription): void } })
      .connection;
    connection.on('rowDescription', onDescription);
    try {
      const sql = new PgSql(client);
      const text = 'SELECT id, at, n, cost, note, n > 3 AS big, count(*) OVER () AS total FROM t WHERE at > @after ORDER BY id';
      const first = await sql.all(text, { after: 0 });
      expect(first).toHaveLength(2);
      for (let i = 0; i < 3; i++) expect(await sql.all(text, { after: 0 })).toEqual(first);
      expect(await sql.all(text, { after: 2_000_000_000_000 })).toEqual([]);
      expect(await sql.get(text, { after: 1_700_000_000_200 })).toEqual({ ...(first[1] as object), total: 1 });
      // A statement without rows, and another with rows, on the same connection meanwhile.
      expect(await sql.run('UPDATE t SET note = note WHERE id = @id', { id: 'zz' })).toEqual({ changes: 0 });
      expect(await sql.get('SELECT id FROM t WHERE id = @id', { id: 'b' })).toEqual({ id: 'b' });
      expect(await sql.all(text, { after: 0 })).toEqual(first);
      expect(described).toEqual(['id,at,n,cost,note,big,total', 'id']);
    } finally {
      connection.off('rowDescription', onDescription);
      client.release();
    }
  });

  it('runs one prepared statement per text on each connection', async () => {
    const text = 'SELECT n FROM t WHERE id = @id';
    for (let i = 0; i < 6; i++) await pgSql.get(text, { id: 'a' });
    const { rows } = await pool.query<{ n: number }>('SELECT count(*) AS n FROM pg_prepared_statements WHERE name = $1', [compileStatement(text).name]);
    // This query ran on one of the pool's (at most two) connections: it sees its own session's statements.
    expect(rows[0]!.n).toBe(1);
  });
  it("a failed statement's error names the code that awaited it, on a checked-out connection and on the pool", async () => {
    const client = await pool.connect();
    try {
      const failAt = async function theCallerOfTheFailingStatement(sql: Sql) {
        await sql.get('SELECT missing_column FROM t WHERE id = @id', { id: 'a' });
      };
      for (const sql of [new PgSql(client), pgSql]) {
        const err = (await failAt(sql).catch((e: unknown) => e)) as Error;
        expect(err.message).toMatch(/missing_column/);
        expect(err.stack).toMatch(/theCallerOfTheFailingStatement/);
      }
    } finally {
      client.release();
    }
  });

  it('a pool of one connection gets it back after each statement (the callback the pool wraps)', async () => {
    const one = openTestPool(database.url, 1);
    try {
      const sql = new PgSql(one);
      for (let i = 0; i < 3; i++) expect(await sql.get<{ n: number }>('SELECT n FROM t WHERE id = @id', { id: 'b' })).toEqual({ n: 4 });
    } finally {
      await one.end();
    }
  });
});
