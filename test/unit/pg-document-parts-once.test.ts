/**
 * On Postgres a transaction inserts a document's new parts in its COMMIT's query (db/document-parts.ts),
 * so its own later statements do not see them: a second read or write of that document in the same
 * transaction would plan from a document without them. It is refused, loudly, and the transaction rolls
 * back; the next transaction sees the parts and writes the document again as usual. Real Postgres, the
 * real writer and statements.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { readWholeDocument, writeDocumentParts } from '../../src/db/document-parts.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertDocument, insertProject, updateDocumentHead } from '../../src/db/projects.js';
import { planParts, rewritePlan, splitDocument } from '../../src/domain/document-parts.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';

const layout = { field: 'epics', key: 'id' };
const split = (content: unknown) => splitDocument(content, layout)!;
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

/** Writes version `version` + 1 of document `d`, from `before` to `after`, in parts (as engine/document-write.ts does). */
async function writeNext(sql: Sql, version: number, before: unknown, after: unknown): Promise<void> {
  const plan = version === 0 ? rewritePlan(split(after), layout)! : planParts(split(before), split(after), layout)!;
  const columns = { content: plan.head, updated_at: 1, parts_field: 'epics', parts_key: 'id' };
  if (version === 0 && plan.kind === 'rewrite')
    await insertDocument(sql, { id: 'd', project_id: 'p', doc_type: 'backlog', version: 1, ...columns, parts_chars: plan.chars });
  const head = (await sql.get<{ parts_chars: number }>("SELECT parts_chars FROM documents WHERE id = 'd'"))!;
  const chars = await writeDocumentParts(sql, 'd', plan, {
    version: version + 1,
    partsChars: head.parts_chars,
    rewrite: () => rewritePlan(split(after), layout)!,
  });
  if (version > 0) await updateDocumentHead(sql, { id: 'd', from_version: version, ...columns, parts_chars: chars });
}

const contentOf = async () => JSON.parse((await readWholeDocument(reader, 'd'))!.content) as unknown;

describe('a document written in parts, twice in one Postgres transaction', () => {
  it('is refused with the reason, the transaction rolls back, and the next transaction writes it as usual', async () => {
    await writer.write((sql) => writeNext(sql, 0, null, backlog('a', 'c')));
    expect(await contentOf()).toEqual(backlog('a', 'c'));

    // 'b' goes between 'a' and 'c' at COMMIT; a second write (a new part after 'b') would not find 'b'.
    const twice = writer.write(async (sql) => {
      await writeNext(sql, 1, backlog('a', 'c'), backlog('a', 'b', 'c'));
      await writeNext(sql, 2, backlog('a', 'b', 'c'), backlog('a', 'b', 'b2', 'c'));
    });
    await expect(twice).rejects.toThrow(/document d was already written in this transaction: its new parts are inserted at COMMIT/);
    const readBack = writer.write(async (sql) => {
      await writeNext(sql, 1, backlog('a', 'c'), backlog('a', 'b', 'c'));
      return readWholeDocument(sql, 'd');
    });
    await expect(readBack).rejects.toThrow(/already written in this transaction/);
    expect(await contentOf()).toEqual(backlog('a', 'c'));

    // One write per transaction: each sees the parts the one before committed.
    await writer.write((sql) => writeNext(sql, 1, backlog('a', 'c'), backlog('a', 'b', 'c')));
    await writer.write((sql) => writeNext(sql, 2, backlog('a', 'b', 'c'), backlog('a', 'b', 'b2', 'c')));
    expect(await contentOf()).toEqual(backlog('a', 'b', 'b2', 'c'));
  });
});
