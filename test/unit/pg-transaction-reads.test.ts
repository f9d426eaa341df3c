/**
 * What a Postgres write transaction keeps of what it read, so that a closure of several items does not
 * read the same rows once per item (issue 18 target 9): the documents it read (db/transaction-reads.ts),
 * until it writes them, and the heads a shared closure of answers locked (db/projects.ts
 * `lockDocumentHeads`), as its own writes leave them (a head's next version queued for the COMMIT too). Each
 * kept value must be what a read would return at that point of the transaction (of the COMMIT, for a
 * version queued), but for another transaction's commit to a document it did not lock.
 * Real Postgres, the real writer and statements.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { parseDocumentJson } from '../../src/daemon/engine/operation-context.js';
import { readDocumentValue } from '../../src/db/document-cache.js';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { writeDocumentsAgain } from '../../src/db/document-parts-queued.js';
import { getDocumentHead, insertDocument, insertProject, lockDocumentHead, lockDocumentHeads, updateDocumentContent } from '../../src/db/projects.js';
import { useTestWriter } from '../helpers/postgres.js';

/** `reader`: another transaction's statements (another connection of the pool, autocommit). */
const db = useTestWriter(4, { raceAttempts: 1 });
beforeAll(() => insertProject(db.reader, { id: 'p', name: 'p', created_at: 1 }));

const HEAD = 'SELECT id, version, updated_at, parts_field, parts_key, parts_chars FROM documents WHERE project_id = ? AND doc_type = ? AND doc_key = ?';
const storedHead = (sql: Sql, docType: string) => sql.get(HEAD, ['p', docType, '']);

async function newDocument(id: string, docType: string, content: unknown): Promise<void> {
  await insertDocument(db.reader, { id, project_id: 'p', doc_type: docType, version: 1, content: JSON.stringify(content), updated_at: 1 });
}

describe('a write transaction', () => {
  it('reads a document once: a commit of another transaction meanwhile is not seen, its own write is', async () => {
    await newDocument('arch', 'arch', { n: 1 });
    const seen = await db.writer.write(async (sql) => {
      const first = await readDocumentValue(sql, 'p', 'arch', parseDocumentJson);
      // Another transaction commits version 2 (READ COMMITTED: a new read would see it).
      await updateDocumentContent(db.reader, { id: 'arch', from_version: 1, content: JSON.stringify({ n: 2 }), updated_at: 2 });
      const again = await readDocumentValue(sql, 'p', 'arch', parseDocumentJson);
      // Not held (no `lockDocumentHeads`): the head's update runs at once, and the read finds it in the table.
      writeDocumentsAgain(sql);
      await updateDocumentContent(sql, { id: 'arch', from_version: 2, content: JSON.stringify({ n: 3 }), updated_at: 3 });
      const written = await readDocumentValue(sql, 'p', 'arch', parseDocumentJson);
      return { first, again, written };
    });
    expect(seen.first).toEqual({ n: 1 });
    expect(seen.again).toBe(seen.first);
    expect(seen.written).toEqual({ n: 3 });
  });

  it('reads a document it did not find again once it created it', async () => {
    const seen = await db.writer.write(async (sql) => {
      const before = await readDocumentValue(sql, 'p', 'fresh', parseDocumentJson);
      await insertDocument(sql, { id: 'fresh', project_id: 'p', doc_type: 'fresh', version: 1, content: JSON.stringify({ n: 1 }), updated_at: 1 });
      return { before, after: await readDocumentValue(sql, 'p', 'fresh', parseDocumentJson) };
    });
    expect(seen).toEqual({ before: null, after: { n: 1 } });
  });
});

describe('a shared closure of answers, holding its targets heads', () => {
  it('finds each held head as its own writes left it: the next version before the COMMIT writes it, created ones as their row', async () => {
    await newDocument('held', 'held', { n: 1 });
    const seen = await db.writer.write(async (sql) => {
      writeDocumentsAgain(sql);
      await lockDocumentHeads(sql, [
        { project_id: 'p', doc_type: 'held', doc_key: '' },
        { project_id: 'p', doc_type: 'absent', doc_key: '' },
      ]);
      const held = await lockDocumentHead(sql, 'p', 'held');
      await updateDocumentContent(sql, { id: 'held', from_version: 1, content: JSON.stringify({ n: 2 }), updated_at: 5 });
      const written = await lockDocumentHead(sql, 'p', 'held');
      const writtenHead = await getDocumentHead(sql, 'p', 'held');
      // The row's content is a version behind until the COMMIT: reading it now is refused.
      const contentRead = await readWholeDocument(sql, 'held').then(
        () => 'read',
        (err: unknown) => String(err),
      );
      const absent = await lockDocumentHead(sql, 'p', 'absent');
      await insertDocument(sql, { id: 'absent', project_id: 'p', doc_type: 'absent', version: 1, content: '{}', updated_at: 6 });
      const created = await lockDocumentHead(sql, 'p', 'absent');
      return {
        held,
        written,
        writtenHead,
        contentRead,
        absent,
        created,
        rows: { written: await storedHead(sql, 'held'), created: await storedHead(sql, 'absent') },
      };
    });
    expect(seen.held).toMatchObject({ id: 'held', version: 1 });
    expect(seen.written).toMatchObject({ version: 2, updated_at: 5 });
    expect(seen.writtenHead).toEqual({ id: 'held', version: 2, updated_at: 5 });
    // Not written yet (the COMMIT's query writes it): the row is at version 1, then at the held head's.
    expect(seen.rows.written).toMatchObject({ version: 1 });
    expect(await storedHead(db.reader, 'held')).toEqual(seen.written);
    expect(seen.contentRead).toMatch(/document held was already written in this transaction: its next version is written at COMMIT/);
    expect(seen.absent).toBeUndefined();
    expect(seen.created).toEqual(seen.rows.created);
  });

  it('reads a held head again once a write of it is queued for the COMMIT', async () => {
    await newDocument('queued', 'queued', { n: 1 });
    const seen = await db.writer.write(async (sql) => {
      await lockDocumentHeads(sql, [{ project_id: 'p', doc_type: 'queued', doc_key: '' }]);
      await updateDocumentContent(sql, { id: 'queued', from_version: 1, content: JSON.stringify({ n: 2 }), updated_at: 5 });
      return { head: await lockDocumentHead(sql, 'p', 'queued'), row: await storedHead(sql, 'queued') };
    });
    // Not written yet (the COMMIT's query writes it): the head is the row's, version 1.
    expect(seen.head).toEqual(seen.row);
    expect(seen.head).toMatchObject({ version: 1 });
    expect(await storedHead(db.reader, 'queued')).toMatchObject({ version: 2 });
  });
});
