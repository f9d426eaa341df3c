/**
 * Two daemons on one Postgres: a document stored in parts that another daemon wrote is read back by
 * this one's cache as what changed (the parts written after the version it holds), the rest of its
 * cached value kept as it is (db/document-cache.ts). Real Postgres, the real writer and statements.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDocumentJson } from '../../src/daemon/engine/operation-context.js';
import { readParsedDocument } from '../../src/db/document-cache.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertProject } from '../../src/db/projects.js';
import { writeNextVersion } from '../helpers/document-versions.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';

type Backlog = { name: string; epics: { id: string; n: number }[] };
const epic = (id: string, n = 0) => ({ id, n });

let database: TestDatabase;
let pools: pg.Pool[];
/** This daemon's reads (its cache) and the other daemon's writes (a cache of its own). */
let reader: PgSql;
let other: PgWriter<never>;

beforeAll(async () => {
  database = await createTestDatabase({ migrated: true });
  pools = [openTestPool(database.url, 2), openTestPool(database.url, 2)];
  reader = new PgSql(pools[0]!);
  other = new PgWriter<never>(pools[1]!, { raceAttempts: 1 });
  await insertProject(reader, { id: 'p', name: 'p', created_at: 1 });
});
afterAll(async () => {
  await other?.close();
  for (const pool of pools ?? []) await pool.end();
  await database?.drop();
});

const read = async () => (await readParsedDocument(reader, 'p', 'backlog', parseDocumentJson)) as { version: number; value: Backlog };

describe("another daemon's write of a document stored in parts", () => {
  it('is read as the parts it wrote: kept elements are the cached ones, the value equals the stored content', async () => {
    const v1: Backlog = { name: 'one', epics: [epic('a'), epic('b'), epic('c'), epic('e')] };
    await other.write((sql) => writeNextVersion(sql, 0, null, v1));
    const first = await read();
    expect(first).toMatchObject({ version: 1, value: v1 });

    // One element changed, one removed, two inserted (between kept ones, and at the end), the head changed.
    const v2: Backlog = { name: 'two', epics: [epic('b', 1), epic('c'), epic('d'), epic('e'), epic('f')] };
    await other.write((sql) => writeNextVersion(sql, 1, v1, v2));
    const second = await read();
    expect(second).toMatchObject({ version: 2, value: v2 });
    const [, b1, c1, e1] = first.value.epics;
    const [b2, c2, , e2] = second.value.epics;
    // Not read or parsed again: the very objects of version 1.
    expect(c2).toBe(c1);
    expect(e2).toBe(e1);
    expect(b2).not.toBe(b1);
    expect(Object.isFrozen(second.value) && Object.isFrozen(second.value.epics) && Object.isFrozen(second.value.epics[2])).toBe(true);
  });

  it('reads a part whose version is 0 (inserted by a build before parts carried theirs) every time, also after that build updates it', async () => {
    const v2 = (await read()).value;
    const v3: Backlog = { ...v2, epics: v2.epics.map((e) => (e.id === 'c' ? epic('c', 7) : e)) };
    await other.write((sql) => writeNextVersion(sql, 2, v2, v3));
    // As an older build's INSERT leaves it (the column's default); its UPDATE (content only) keeps the 0.
    await pools[1]!.query("UPDATE document_parts SET version = 0 WHERE document_id = 'd' AND part_key = 'c'");
    expect(await read()).toMatchObject({ version: 3, value: v3 });
    const v4: Backlog = { ...v3, name: 'four' };
    await other.write((sql) => writeNextVersion(sql, 3, v3, v4));
    await pools[1]!.query(`UPDATE document_parts SET content = '{"id":"c","n":8}' WHERE document_id = 'd' AND part_key = 'c'`);
    expect((await read()).value.epics.find((e) => e.id === 'c')).toEqual(epic('c', 8));
  });
});
