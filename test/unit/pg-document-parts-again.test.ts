/**
 * A shared closure of answers that writes one document several times (db/document-parts.ts
 * `writeDocumentsAgain`) queues every part's write for its COMMIT and plans each next version from the
 * places it noted: the document it leaves must be the one the same versions leave written one transaction
 * each — the same parts (keys, order keys, texts, versions), the same head — also when a new element goes
 * between parts the closure itself queued, next to a part it removed, or before any. Real Postgres, the
 * real writer and statements, the engine's document write.
 */
import { describe, expect, it, beforeAll } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { writeDocument } from '../../src/daemon/engine/document-write.js';
import { readWholeDocument, writeDocumentsAgain } from '../../src/db/document-parts.js';
import { insertProject, lockDocumentHead, lockDocumentHeads } from '../../src/db/projects.js';
import { splitDocument } from '../../src/domain/document-parts.js';
import { useTestWriter } from '../helpers/postgres.js';

const db = useTestWriter(4, { raceAttempts: 1 });
const LAYOUT = { field: 'epics', key: 'id' };

const backlog = (...ids: string[]) => ({ name: 'b', epics: ids.map((id) => ({ id, text: id.endsWith("'") ? 'changed' : id })) });

/** Each version after the one before: a middle insert between stored parts, then between parts queued, a removal, a change, both ends. */
const VERSIONS = [
  backlog('a', 'c'),
  backlog('a', 'b', 'c'),
  backlog('a', 'b', 'b2', 'c'),
  backlog('a', 'b', 'x', 'b2', 'c'),
  backlog('b', 'x', 'y', 'b2', 'c'),
  backlog('z', 'b', 'x', 'y', 'b2', 'c', 'd'),
  backlog('z', 'b', 'x', 'w', 'y', 'b2', 'd'),
];

/** Version `i` of project `project`'s backlog, written as an answer's apply writes it (engine/operation-steps.ts). */
async function writeVersion(sql: Sql, project: string, i: number): Promise<void> {
  const head = await lockDocumentHead(sql, project, 'backlog');
  const content = VERSIONS[i]!;
  await writeDocument(sql, {
    operation: 'test',
    head,
    current: i === 0 ? null : VERSIONS[i - 1],
    planned: { content, text: null, split: { layout: LAYOUT, next: splitDocument(content, LAYOUT)! }, summary: {} },
    create: { id: `${project}-backlog`, project_id: project, doc_type: 'backlog', doc_key: '' },
    now: 10 + i,
  });
}

/**
 * Versions `from`…`to` in one closure that writes documents again, holding the backlog's head (engine/leased.ts
 * `lockTargetDocuments`); the parts the transaction itself sees after its writes, before its COMMIT.
 */
function writeInOneClosure(project: string, from: number, to: number): Promise<unknown[]> {
  return db.writer.write(async (sql) => {
    writeDocumentsAgain(sql);
    await lockDocumentHeads(sql, [{ project_id: project, doc_type: 'backlog', doc_key: '' }]);
    for (let i = from; i <= to; i++) await writeVersion(sql, project, i);
    return sql.all('SELECT part_key FROM document_parts WHERE document_id = ? ORDER BY ord', [`${project}-backlog`]);
  });
}

async function stored(project: string) {
  const id = `${project}-backlog`;
  const head = await db.reader.get('SELECT version, content, updated_at, parts_field, parts_key, parts_chars FROM documents WHERE id = ?', [id]);
  const parts = await db.reader.all('SELECT part_key, ord, content, version FROM document_parts WHERE document_id = ? ORDER BY ord', [id]);
  return { head, parts, whole: JSON.parse((await readWholeDocument(db.reader, id))!.content) as unknown };
}

beforeAll(async () => {
  for (const id of ['one-each', 'created', 'written']) await insertProject(db.reader, { id, name: id, created_at: 1 });
  for (let i = 0; i < VERSIONS.length; i++) await db.writer.write((sql) => writeVersion(sql, 'one-each', i));
});

describe('a document written several times by one closure of answers', () => {
  it('created and written again in the closure: the parts and head of one transaction per version', async () => {
    // Every part's write rode in the COMMIT's query: none is a round trip while the closure holds the head.
    expect(await writeInOneClosure('created', 0, VERSIONS.length - 1)).toEqual([]);
    const reference = await stored('one-each');
    expect(reference.whole).toEqual(VERSIONS.at(-1));
    expect(reference.head).toMatchObject({ version: VERSIONS.length });
    expect(await stored('created')).toEqual(reference);
  });

  it('written from a committed version in parts: the same', async () => {
    await db.writer.write((sql) => writeVersion(sql, 'written', 0));
    // The parts of version 1, as committed: this closure's writes of them wait for its COMMIT.
    expect(await writeInOneClosure('written', 1, VERSIONS.length - 1)).toEqual([{ part_key: 'a' }, { part_key: 'c' }]);
    expect(await stored('written')).toEqual(await stored('one-each'));
  });
});
