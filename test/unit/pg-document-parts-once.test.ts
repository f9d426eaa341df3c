/**
 * On Postgres a transaction inserts a document's new parts in its COMMIT's query (db/document-parts.ts),
 * so its own later statements do not see them: a second read or write of that document in the same
 * transaction would plan from a document without them. It is refused, loudly, and the transaction rolls
 * back; the next transaction sees the parts and writes the document again as usual. Real Postgres, the
 * real writer and statements.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertProject } from '../../src/db/projects.js';
import { writeNextVersion } from '../helpers/document-versions.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';

const backlog = (...ids: string[]) => ({ name: 'b', epics: ids.map((id) => ({ id })) });

let database: TestDatabase;
let pool: pg.Pool;
let reader: PgSql;
let writer: PgWriter<never>;

beforeAll(async () => {
  database = await createTestDatabase({ migrated: true });
  pool = openTestPool(database.url, 2);
  reader = new PgSql(pool);
  writer = new PgWriter<never>(pool, { raceAttempts: 1 });
  await insertProject(reader, { id: 'p', name: 'p', created_at: 1 });
});
afterAll(async () => {
  await writer?.close();
  await pool?.end();
  await database?.drop();
});

const contentOf = async () => JSON.parse((await readWholeDocument(reader, 'd'))!.content) as unknown;

describe('a document written in parts, twice in one Postgres transaction', () => {
  it('is refused with the reason, the transaction rolls back, and the next transaction writes it as usual', async () => {
    await writer.write((sql) => writeNextVersion(sql, 0, null, backlog('a', 'c')));
    expect(await contentOf()).toEqual(backlog('a', 'c'));

    // 'b' goes between 'a' and 'c' at COMMIT; a second write (a new part after 'b') would not find 'b'.
    const twice = writer.write(async (sql) => {
      await writeNextVersion(sql, 1, backlog('a', 'c'), backlog('a', 'b', 'c'));
      await writeNextVersion(sql, 2, backlog('a', 'b', 'c'), backlog('a', 'b', 'b2', 'c'));
    });
    await expect(twice).rejects.toThrow(/document d was already written in this transaction: its new parts are inserted at COMMIT/);
    const readBack = writer.write(async (sql) => {
      await writeNextVersion(sql, 1, backlog('a', 'c'), backlog('a', 'b', 'c'));
      return readWholeDocument(sql, 'd');
    });
    await expect(readBack).rejects.toThrow(/already written in this transaction/);
    expect(await contentOf()).toEqual(backlog('a', 'c'));

    // One write per transaction: each sees the parts the one before committed.
    await writer.write((sql) => writeNextVersion(sql, 1, backlog('a', 'c'), backlog('a', 'b', 'c')));
    await writer.write((sql) => writeNextVersion(sql, 2, backlog('a', 'b', 'c'), backlog('a', 'b', 'b2', 'c')));
    expect(await contentOf()).toEqual(backlog('a', 'b', 'b2', 'c'));
  });
});
