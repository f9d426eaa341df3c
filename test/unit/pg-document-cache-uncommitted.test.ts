/**
 * One daemon on Postgres, its read and write pools sharing one document cache (storage.ts): a version its
 * write remembered before the COMMIT (engine/operation-steps.ts `rememberWrittenDocument`) must not leak
 * into what its other connections read — a prompt built from it, or a later apply planned from it, would
 * carry content that may yet roll back. Real Postgres, the real writer, cache and statements.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDocumentJson } from '../../src/daemon/engine/operation-context.js';
import { forgetDocuments, readParsedDocument, rememberDocument, shareDocumentCache } from '../../src/db/document-cache.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertProject } from '../../src/db/projects.js';
import { writeNextVersion } from '../helpers/document-versions.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';

type Backlog = { name: string; epics: { id: string; n: number }[] };
const epic = (id: string, n = 0) => ({ id, n });

let database: TestDatabase;
let pools: pg.Pool[];
let reader: PgSql;
let writer: PgWriter<never>;

beforeAll(async () => {
  database = await createTestDatabase({ migrated: true });
  pools = [openTestPool(database.url, 2), openTestPool(database.url, 2)];
  // As storage.ts does: the read pool and every connection of the write pool share one cache.
  const group = {};
  shareDocumentCache(pools[0]!, group);
  pools[1]!.on('connect', (client) => shareDocumentCache(client, group));
  reader = new PgSql(pools[0]!);
  writer = new PgWriter<never>(pools[1]!, { raceAttempts: 1, onRollback: (connection) => forgetDocuments({ connection }) });
  await insertProject(reader, { id: 'p', name: 'p', created_at: 1 });
});
afterAll(async () => {
  await writer?.close();
  for (const pool of pools ?? []) await pool.end();
  await database?.drop();
});

const read = async () => (await readParsedDocument(reader, 'p', 'backlog', parseDocumentJson)) as { version: number; value: Backlog };

describe('a version this daemon remembered before its COMMIT', () => {
  it('is not what its other connections read: they get the committed version, before and after the rollback', async () => {
    const v1: Backlog = { name: 'one', epics: [epic('a'), epic('b')] };
    await writer.write((sql) => writeNextVersion(sql, 0, null, v1));
    expect(await read()).toMatchObject({ version: 1, value: v1 });
    forgetDocuments(reader); // the read pool's next read misses, with the write's entry the newer one

    const v2: Backlog = { name: 'one', epics: [epic('a'), epic('b', 9)] };
    let during: unknown;
    await writer
      .write(async (sql) => {
        await writeNextVersion(sql, 1, v1, v2);
        rememberDocument(sql, 'd', 2, parseDocumentJson, parseDocumentJson(JSON.stringify(v2)));
        during = await read();
        throw new Error('the write fails: rolled back');
      })
      .catch(() => {});
    expect(during).toMatchObject({ version: 1, value: v1 });
    expect(await read()).toMatchObject({ version: 1, value: v1 });
  });
});
