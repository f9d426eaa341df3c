/**
 * A schema change made by another connection (a newer daemon migrating the shared database during a rolling
 * upgrade) under statements this process prepared: Postgres refuses to run a prepared `SELECT *` or
 * `RETURNING *` whose columns changed (0A000 "cached plan must not change result type") on every connection
 * that prepared it. Reads through PgSql and writes through the PgWriter (the closure's statements, the one
 * BEGIN rides with, and one queued for the COMMIT query) carry on, and return the new columns (a daemon's: test/integration/pg-stale-plans.test.ts).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { createTestDatabase, openTestPool, type TestDatabase } from '../helpers/postgres.js';

/** A promise and its resolver: writes wait on it so that each holds its own connection. */
function gate(): { open: () => void; opened: Promise<void> } {
  let open!: () => void;
  const opened = new Promise<void>((r) => {
    open = r;
  });
  return { open, opened };
}

const CONNECTIONS = 3;
const READ = 'SELECT * FROM s WHERE id = @id';
// n counts the writes committed: a write whose COMMIT query failed and ran again must have added one, not two.
const UPDATE = 'UPDATE s SET v = @v, n = n + 1 WHERE id = @id RETURNING *';
const READ_IN_WRITE = 'SELECT s.* FROM s WHERE id = @id';
// Read by closures that catch its failure and carry on (as a closure that falls back on another read would).
const CAUGHT = 'SELECT s.*, 1 AS caught FROM s WHERE id = @id';

describe('prepared statements after another connection changed the schema', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let other: pg.Pool;
  let sql: PgSql;
  let writer: PgWriter;

  beforeAll(async () => {
    database = await createTestDatabase();
    pool = openTestPool(database.url, CONNECTIONS);
    other = openTestPool(database.url, 1);
    sql = new PgSql(pool);
    writer = new PgWriter(pool);
    await other.query('CREATE TABLE s (id INTEGER PRIMARY KEY, v TEXT NOT NULL, n INTEGER NOT NULL)');
    await other.query(`INSERT INTO s VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)`);
  });
  afterAll(async () => {
    await writer.close();
    await pool.end();
    await other.end();
    await database.drop();
  });

  /** Reads on every connection of the pool at once, so each prepares READ. */
  const readOnEvery = () => Promise.all([1, 2, 3].map((id) => sql.get<Record<string, unknown>>(READ, { id })));

  /**
   * Writes on every connection at once (each holds its connection until all have begun): each reads with
   * READ_IN_WRITE (the statement BEGIN rides with), unless `read` is false (then its only statement is the
   * one its COMMIT query runs), and queues UPDATE for its COMMIT query.
   */
  const writeOnEvery = async (v: string, read = true) => {
    const all = gate();
    let begun = 0;
    return Promise.all(
      [1, 2, 3].map((id) =>
        writer
          .write(async (w) => {
            const row = read ? await w.get<Record<string, unknown>>(READ_IN_WRITE, { id }) : null;
            if (++begun === CONNECTIONS) all.open();
            await all.opened;
            let updated: unknown[] = [];
            w.atCommit!(UPDATE, { id, v: `${v}${id}` }, (rows) => (updated = rows));
            return { read: row, updated: () => updated };
          })
          .then((r) => ({ read: r.read, updated: r.updated() })),
      ),
    );
  };

  it('reads and writes carry on with the new columns after columns are added, and after a column type changes', async () => {
    expect(await readOnEvery()).toEqual([
      { id: 1, v: 'a', n: 1 },
      { id: 2, v: 'b', n: 2 },
      { id: 3, v: 'c', n: 3 },
    ]);
    const before = await writeOnEvery('x');
    expect(before.map((r) => r.updated)).toEqual([[{ id: 1, v: 'x1', n: 2 }], [{ id: 2, v: 'x2', n: 3 }], [{ id: 3, v: 'x3', n: 4 }]]);
    // Every connection of the pool has prepared all three statements (the writes held all three at once).
    expect(pool.totalCount).toBe(CONNECTIONS);

    await other.query(`ALTER TABLE s ADD COLUMN extra TEXT NOT NULL DEFAULT 'new'`);

    // Again on the same pool, one at a time: each may land on a connection that prepared it before the change.
    for (const id of [1, 2, 3, 1, 2, 3]) expect(await sql.get(READ, { id })).toEqual({ id, v: `x${id}`, n: id + 1, extra: 'new' });
    const after = await writeOnEvery('y');
    expect(after.map((r) => r.updated)).toEqual([1, 2, 3].map((id) => [{ id, v: `y${id}`, n: id + 2, extra: 'new' }]));

    // Another column, now under writes first: their closures' first statements (sent with BEGIN) were prepared before it.
    await other.query(`ALTER TABLE s ADD COLUMN more INTEGER NOT NULL DEFAULT 7`);
    const more = await writeOnEvery('w');
    expect(more.map((r) => r.read)).toEqual([1, 2, 3].map((id) => ({ id, v: `y${id}`, n: id + 2, extra: 'new', more: 7 })));
    expect(more.map((r) => r.updated)).toEqual([1, 2, 3].map((id) => [{ id, v: `w${id}`, n: id + 3, extra: 'new', more: 7 }]));

    // A column's type changes (int4 to int8: read as a number all the same). First, writes whose only
    // statement is the one queued for the COMMIT query (`EXECUTE name_c`, prepared there before the change).
    await other.query('ALTER TABLE s ALTER COLUMN n TYPE BIGINT');
    const changed = await writeOnEvery('z', false);
    expect(changed.map((r) => r.updated)).toEqual([1, 2, 3].map((id) => [{ id, v: `z${id}`, n: id + 4, extra: 'new', more: 7 }]));
    expect(await readOnEvery()).toEqual([1, 2, 3].map((id) => ({ id, v: `z${id}`, n: id + 4, extra: 'new', more: 7 })));
  });

  it('a write whose closure caught the stale plan runs again on a new connection, not failing with the aborted transaction', async () => {
    /** On every connection at once: CAUGHT, its failure caught, then another statement; returns what CAUGHT read. */
    const catchOnEvery = () => {
      const all = gate();
      let begun = 0;
      return Promise.all(
        [1, 2, 3].map((id) =>
          writer.write(async (w) => {
            const row = await w.get<Record<string, unknown>>(CAUGHT, { id }).catch(() => null);
            if (++begun === CONNECTIONS) all.open();
            await all.opened;
            await w.get('SELECT count(*) AS rows FROM s');
            return row;
          }),
        ),
      );
    };
    // Every connection prepares CAUGHT (the writes hold all three at once).
    expect((await catchOnEvery()).map((r) => r?.caught)).toEqual([1, 1, 1]);
    await other.query(`ALTER TABLE s ADD COLUMN last TEXT NOT NULL DEFAULT 'l'`);
    // Without the writer seeing the caught 0A000, each write failed with 25P02 (current transaction is aborted).
    expect((await catchOnEvery()).map((r) => r?.last)).toEqual(['l', 'l', 'l']);
  });
});
