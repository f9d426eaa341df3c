/**
 * One daemon on Postgres, its read and write pools sharing one document cache (storage.ts): a version its
 * write remembered before the COMMIT (engine/operation-steps.ts `rememberWrittenDocument`) must not leak
 * into what its other connections read — a prompt built from it, or a later apply planned from it, would
 * carry content that may yet roll back. And the other way round: the value a shared closure of two answers
 * of one project wrote of a document whose next version it queued for the COMMIT stays what that closure
 * reads, whatever the daemon's other connections and rollbacks do to the shared cache meanwhile.
 * Real Postgres, the real writer, cache and statements.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { parseDocumentJson, rememberWrittenDocument } from '../../src/daemon/engine/operation-context.js';
import { forgetDocuments, readDocumentValue, readParsedDocument, rememberDocument, shareDocumentCache } from '../../src/db/document-cache.js';
import { writeDocumentsAgain } from '../../src/db/document-parts-queued.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertDocument, insertProject, lockDocumentHeads, updateDocumentContent } from '../../src/db/projects.js';
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

/**
 * As leased.ts `lockTargetDocuments` and operation-steps.ts `applyThreadAnswer` do for a closure's first
 * answer of project 'q': its target held, its next version (2) queued for the COMMIT, the value remembered.
 */
async function applyFirstAnswer(sql: Sql, id: string, docType: string): Promise<void> {
  writeDocumentsAgain(sql);
  await lockDocumentHeads(sql, [{ project_id: 'q', doc_type: docType, doc_key: '' }]);
  await updateDocumentContent(sql, { id, from_version: 1, content: JSON.stringify({ n: 2 }), updated_at: 2 });
  rememberWrittenDocument(sql, id, 2, { n: 2 });
}

describe('a shared closure of two answers of one project, its next version queued for the COMMIT', () => {
  beforeAll(async () => {
    await insertProject(reader, { id: 'q', name: 'q', created_at: 1 });
    for (const [id, docType] of [
      ['qd', 'backlog'],
      ['qe', 'arch'],
    ] as const)
      await insertDocument(reader, { id, project_id: 'q', doc_type: docType, version: 1, content: JSON.stringify({ n: 1 }), updated_at: 1 });
  });

  it('reads the version its first apply wrote even after another connection of the daemon re-read the committed one', async () => {
    const seen = await writer.write(async (sql) => {
      await applyFirstAnswer(sql, 'qd', 'backlog');
      // Meanwhile a start of another item of the project, on the read pool, reads the backlog (its prompt).
      const other = await readParsedDocument(reader, 'q', 'backlog', parseDocumentJson);
      // The second answer's apply reads the backlog (its target, or a document of its project).
      const second = await readDocumentValue(sql, 'q', 'backlog', parseDocumentJson);
      return { other: other?.version, second };
    });
    expect(seen).toEqual({ other: 1, second: { n: 2 } });
  });

  it('reads the version its first apply wrote even after another transaction of the daemon rolled back (the cache forgotten)', async () => {
    const seen = await writer.write(async (sql) => {
      await applyFirstAnswer(sql, 'qe', 'arch');
      // Another write of the daemon rolls back meanwhile: the writer's onRollback forgets the group's cache.
      forgetDocuments(reader);
      return readDocumentValue(sql, 'q', 'arch', parseDocumentJson);
    });
    expect(seen).toEqual({ n: 2 });
  });
});
