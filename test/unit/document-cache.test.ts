/**
 * The parsed-document cache must never show content that is not stored: a write rolled back after it
 * bumped a document's version must not leave its content behind for that version number.
 */
import type { Sql } from '../../src/core/sql.js';
import { SqliteSql } from '../../src/db/sql.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { documentValueAt, forgetDocuments, readDocumentValue, readParsedDocument, rememberDocument, shareDocumentCache } from '../../src/db/document-cache.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { getDocumentHead, insertDocument, insertProject, updateDocumentContent } from '../../src/db/projects.js';
import { Writer } from '../../src/db/writer.js';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';
import { newId } from '../../src/core/ids.js';
import { systemClock } from '../../src/core/clock.js';

const parse = (content: string) => JSON.parse(content) as { n: number };

describe('parsed-document cache', () => {
  let dir: string;
  let db: Db;
  let sql: SqliteSql;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-doccache-'));
    db = openDatabase(join(dir, 'c.db'));
    sql = new SqliteSql(db);
    applyMigrations(db);
    await insertProject(sql, { id: 'p', name: 'P', created_at: 0 });
    await insertDocument(sql, { id: 'd', project_id: 'p', doc_type: 'story_backlog', version: 1, content: '{"n":1}', updated_at: 0 });
  });
  afterEach(async () => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  async function bump(w: Sql, from: number, n: number): Promise<void> {
    await updateDocumentContent(w, { id: 'd', from_version: from, content: JSON.stringify({ n }), updated_at: 0 });
    rememberDocument(w, 'd', from + 1, parse, { n });
  }

  it('follows the stored version, and forgets what a rolled-back write remembered', async () => {
    const writer = new Writer(db, { onRollback: () => forgetDocuments({ connection: db }) });
    expect((await readParsedDocument(sql, 'p', 'story_backlog', parse))?.value).toEqual({ n: 1 });
    await expect(
      writer.write(async (w) => {
        await bump(w, 1, 99);
        throw new Error('validation failed after the update');
      }),
    ).rejects.toThrow(/validation failed/);
    // Version 2 now gets different content: the rolled-back {n: 99} must not come back for it.
    await writer.write((w) => updateDocumentContent(w, { id: 'd', from_version: 1, content: '{"n":2}', updated_at: 0 }));
    expect(await readParsedDocument(sql, 'p', 'story_backlog', parse)).toMatchObject({ version: 2, value: { n: 2 } });
  });

  it('reads the stored version after a rolled-back write', async () => {
    const writer = new Writer(db, { onRollback: () => forgetDocuments({ connection: db }) });
    await expect(
      writer.write(async (w) => {
        await bump(w, 1, 99);
        return w.get('SELECT * FROM no_such_table');
      }),
    ).rejects.toThrow();
    expect(await readParsedDocument(sql, 'p', 'story_backlog', parse)).toMatchObject({ version: 1, value: { n: 1 } });
  });

  it("gives the value of the head a write just read (the engine's apply), never another version's", async () => {
    const writer = new Writer(db, { onRollback: () => forgetDocuments({ connection: db }) });
    // Cached at version 1 by a read; the value for a head at version 1 comes from the cache.
    expect(await readDocumentValue(sql, 'p', 'story_backlog', parse)).toEqual({ n: 1 });
    const v1 = await getDocumentHead(sql, 'p', 'story_backlog');
    expect(documentValueAt(sql, v1, parse)).toEqual({ n: 1 });
    // Another connection (the writer's) moved it to version 2 without telling this one's cache: a head
    // at version 2 must load version 2, not serve the cached version 1.
    await writer.write((w) => updateDocumentContent(w, { id: 'd', from_version: 1, content: '{"n":2}', updated_at: 0 }));
    const v2 = await getDocumentHead(sql, 'p', 'story_backlog');
    expect(v2?.version).toBe(2);
    expect(await documentValueAt(sql, v2, parse)).toEqual({ n: 2 });
    expect(documentValueAt(sql, v2, parse)).toEqual({ n: 2 }); // now cached
    // Inside a write that remembered content it then rolled back, the same version number is read anew.
    await expect(
      writer.write(async (w) => {
        await bump(w, 2, 99);
        expect(documentValueAt(w, await getDocumentHead(w, 'p', 'story_backlog'), parse)).toEqual({ n: 99 });
        throw new Error('rolled back');
      }),
    ).rejects.toThrow(/rolled back/);
    const after = await writer.write(async (w) => {
      await updateDocumentContent(w, { id: 'd', from_version: 2, content: '{"n":3}', updated_at: 0 });
      return documentValueAt(w, await getDocumentHead(w, 'p', 'story_backlog'), parse);
    });
    expect(after).toEqual({ n: 3 });
    expect(documentValueAt(sql, undefined, parse)).toBeNull();
  });

  it('makes ids that sort in creation order', async () => {
    const ids = Array.from({ length: 5000 }, () => newId(systemClock.now()));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

describe('parsed-document cache on Postgres', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  let reader: Sql;
  beforeAll(async () => {
    database = await createTestDatabase();
    await applyPgMigrations(database.url);
    // One connection: the rolled-back write's connection is the one every later read and write uses.
    pool = openTestPool(database.url, 1);
    reader = new PgSql(pool);
    await insertProject(reader, { id: 'p', name: 'P', created_at: 0 });
    await insertDocument(reader, { id: 'd', project_id: 'p', doc_type: 'story_backlog', version: 1, content: '{"n":1}', updated_at: 0 });
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  it('forgets what a rolled-back write remembered on its connection, before the connection is used again', async () => {
    const writer = new PgWriter(pool, { onRollback: (connection) => forgetDocuments({ connection }) });
    await expect(
      writer.write(async (w) => {
        await updateDocumentContent(w, { id: 'd', from_version: 1, content: '{"n":99}', updated_at: 0 });
        rememberDocument(w, 'd', 2, parse, { n: 99 });
        throw new Error('validation failed after the update');
      }),
    ).rejects.toThrow(/validation failed/);
    await writer.write((w) => updateDocumentContent(w, { id: 'd', from_version: 1, content: '{"n":2}', updated_at: 0 }));
    const inWrite = await writer.write((w) => readParsedDocument(w, 'p', 'story_backlog', parse));
    expect(inWrite).toMatchObject({ version: 2, value: { n: 2 } });
    expect(await readParsedDocument(reader, 'p', 'story_backlog', parse)).toMatchObject({ version: 2, value: { n: 2 } });
  });

  it("shares one cache among a daemon's pools, and a rollback on any connection forgets it for all", async () => {
    // As daemon/storage.ts: the reader pool and every connection of the write pool share one cache.
    const group = {};
    const writePool = openTestPool(database.url, 2);
    const readPool = openTestPool(database.url, 2);
    shareDocumentCache(readPool, group);
    writePool.on('connect', (client) => shareDocumentCache(client, group));
    const shared = new PgSql(readPool);
    const writer = new PgWriter(writePool, { onRollback: (connection) => forgetDocuments({ connection }) });
    try {
      const from = (await getDocumentHead(shared, 'p', 'story_backlog'))!.version;
      // A version a committed write remembered is what the reader pool's connections get, without a read.
      const value = { n: 10 };
      await writer.write(async (w) => {
        await updateDocumentContent(w, { id: 'd', from_version: from, content: '{"n":10}', updated_at: 0 });
        rememberDocument(w, 'd', from + 1, parse, value);
      });
      expect((await readParsedDocument(shared, 'p', 'story_backlog', parse))?.value).toBe(value);
      // A write rolled back after it remembered its version: the next version number, committed with
      // other content, must come back with that content on the other pool's connections too.
      await expect(
        writer.write(async (w) => {
          await updateDocumentContent(w, { id: 'd', from_version: from + 1, content: '{"n":99}', updated_at: 0 });
          rememberDocument(w, 'd', from + 2, parse, { n: 99 });
          throw new Error('validation failed after the update');
        }),
      ).rejects.toThrow(/validation failed/);
      await writer.write((w) => updateDocumentContent(w, { id: 'd', from_version: from + 1, content: '{"n":11}', updated_at: 0 }));
      expect(await readParsedDocument(shared, 'p', 'story_backlog', parse)).toMatchObject({ version: from + 2, value: { n: 11 } });
    } finally {
      await writePool.end();
      await readPool.end();
    }
  });
});
