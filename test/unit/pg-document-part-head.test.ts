/**
 * On Postgres a write of a document stored in parts runs its last new part's INSERT and its head's guarded
 * UPDATE as one statement of the COMMIT's query (db/document-parts.ts `writeDocumentParts`, issue 18 target 9:
 * a statement fewer per item), and keeps both guards: a head no longer at the version read, or a neighbour the
 * part is placed from that is gone, refuses the write with nothing of it committed; a part INSERT naming one of
 * the head's parameters is refused before it runs (joined, one would take the other's value). A closure that writes the
 * document twice queues one such statement per write, and its second write's part, placed next to the first
 * write's, reads it in the statement after the first's. A plan's runs read their neighbours' orders in one
 * statement. Real Postgres, the real writer and statements, the engine's document write.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { StaleStateError } from '../../src/core/errors.js';
import { writeDocument } from '../../src/daemon/engine/document-write.js';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { writeDocumentsAgain } from '../../src/db/document-parts-queued.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import { insertProject, lockDocumentHead, lockDocumentHeads, updateDocumentHead } from '../../src/db/projects.js';
import { splitDocument } from '../../src/domain/document-parts.js';
import { BACKLOG_LAYOUT, type BacklogDocument, writeNextVersion } from '../helpers/document-versions.js';
import { createTestDatabase, openTestPool, type TestDatabase } from '../helpers/postgres.js';

const backlog = (...ids: string[]) => ({ name: 'b', epics: ids.map((id) => ({ id })) });

let database: TestDatabase;
let writerPool: pg.Pool;
let readerPool: pg.Pool;
let reader: PgSql;
let writer: PgWriter<never>;
/** The text of every query the writer's connection sent (a COMMIT's query is one text). */
const sent: string[] = [];

beforeAll(async () => {
  database = await createTestDatabase({ migrated: true });
  writerPool = openTestPool(database.url, 1);
  readerPool = openTestPool(database.url, 1);
  writerPool.on('acquire', (client) => {
    const marked = client as unknown as { recorded?: boolean; query: (...args: unknown[]) => unknown };
    if (marked.recorded) return;
    marked.recorded = true;
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    marked.query = (config: unknown, ...rest: unknown[]) => {
      sent.push(typeof config === 'string' ? config : (config as { text: string }).text);
      return query(config, ...rest);
    };
  });
  reader = new PgSql(readerPool);
  writer = new PgWriter<never>(writerPool, { raceAttempts: 1, conflictAttempts: 1 });
  await insertProject(reader, { id: 'again', name: 'again', created_at: 1 });
});
afterAll(async () => {
  await writer?.close();
  await writerPool?.end();
  await readerPool?.end();
  await database?.drop();
});

/** The statements the writer's COMMIT queries ran since query `from` of `sent`, each by its text (an `EXECUTE` by the text it was prepared with). */
function committedStatements(from: number): string[] {
  const prepared = new Map<string, string>();
  const run: string[] = [];
  for (const [i, text] of sent.entries()) {
    if (!/\bCOMMIT\b/.test(text)) continue;
    for (const part of text.split(';\n')) {
      const declared = /^PREPARE (\w+) AS (.*)$/s.exec(part);
      if (declared) prepared.set(declared[1]!, declared[2]!);
      else if (i >= from) run.push(prepared.get(/^EXECUTE (\w+)\(/.exec(part)?.[1] ?? '') ?? part);
    }
  }
  return run;
}

const stored = async (id: string) => ({
  head: await reader.get<{ version: number; parts_chars: number }>('SELECT version, parts_chars FROM documents WHERE id = ?', [id]),
  parts: await reader.all<{ part_key: string; ord: number; version: number }>(
    'SELECT part_key, ord, version FROM document_parts WHERE document_id = ? ORDER BY ord',
    [id],
  ),
});

/** A new project `name` and its backlog document `<name>-d`, none of whose versions is written yet: each case writes its own. */
async function freshDocument(name: string): Promise<BacklogDocument> {
  await insertProject(reader, { id: name, name, created_at: 1 });
  return { id: `${name}-d`, project_id: name };
}

describe('a document in parts written once per transaction, on Postgres', () => {
  it("runs the new part's INSERT and the head's guarded UPDATE as one statement of the COMMIT's query", async () => {
    const doc = await freshDocument('joined');
    await writer.write((sql) => writeNextVersion(sql, 0, null, backlog('a', 'c'), doc));
    const from = sent.length;
    // 'b' between 'a' and 'c' (at its ord), then 'd' after 'c' (placed from it by its own INSERT … SELECT).
    await writer.write((sql) => writeNextVersion(sql, 1, backlog('a', 'c'), backlog('a', 'b', 'c'), doc));
    await writer.write((sql) => writeNextVersion(sql, 2, backlog('a', 'b', 'c'), backlog('a', 'b', 'c', 'd'), doc));
    const statements = committedStatements(from).filter((text) => /document_parts|UPDATE documents/.test(text));
    expect(statements).toHaveLength(2);
    expect(statements[0]).toMatch(/^WITH changed AS \(UPDATE documents .*written_along AS \(INSERT INTO document_parts .* VALUES /s);
    expect(statements[1]).toMatch(/^WITH changed AS \(UPDATE documents .*written_along AS \(INSERT INTO document_parts .* SELECT .* n\.ord \+ /s);
    expect(JSON.parse((await readWholeDocument(reader, doc.id))!.content)).toEqual(backlog('a', 'b', 'c', 'd'));
    const { head, parts } = await stored(doc.id);
    expect(head!.version).toBe(3);
    expect(parts.map((p) => [p.part_key, p.version])).toEqual([
      ['a', 1],
      ['b', 2],
      ['c', 1],
      ['d', 3],
    ]);
  });

  it('refuses a head no longer at the version read, with nothing of the write committed', async () => {
    const doc = await freshDocument('stale');
    await writer.write((sql) => writeNextVersion(sql, 0, null, backlog('a', 'c'), doc));
    await writer.write((sql) => writeNextVersion(sql, 1, backlog('a', 'c'), backlog('a', 'b', 'c'), doc));
    const before = await stored(doc.id);
    // Planned from version 1, which version 2 replaced; its part 'e' goes after 'c', which is there.
    const stale = writer.write((sql) => writeNextVersion(sql, 1, backlog('a', 'c'), backlog('a', 'c', 'e'), doc));
    await expect(stale).rejects.toThrow(StaleStateError);
    await expect(stale).rejects.toThrow(/document stale-d is no longer at version 1/);
    expect(await stored(doc.id)).toEqual(before);
  });

  it('refuses a part placed next to a neighbour that is gone, with nothing of the write committed', async () => {
    const doc = await freshDocument('gone');
    await writer.write((sql) => writeNextVersion(sql, 0, null, backlog('a', 'c'), doc));
    const before = await stored(doc.id);
    // At the right version, but planned from a version with 'x', which the table never had: 'y' goes after 'x'.
    const gone = writer.write((sql) => writeNextVersion(sql, 1, backlog('a', 'c', 'x'), backlog('a', 'c', 'x', 'y'), doc));
    await expect(gone).rejects.toThrow(StaleStateError);
    await expect(gone).rejects.toThrow(/document gone-d has no part "x"/);
    expect(await stored(doc.id)).toEqual(before);
  });

  it("refuses a part INSERT that names one of the head UPDATE's parameters, before anything runs", async () => {
    const doc = await freshDocument('clash');
    await writer.write((sql) => writeNextVersion(sql, 0, null, backlog('a'), doc));
    const before = await stored(doc.id);
    // `@content` is the head's: joined, the part would be written with the head's content (or the head with the part's).
    const along = {
      text: 'INSERT INTO document_parts (document_id, part_key, ord, content, version) VALUES (@document_id, @part_key, 1, @content, 2)',
      params: { document_id: doc.id, part_key: 'b', content: '{}' },
    };
    const clash = writer.write((sql) =>
      updateDocumentHead(sql, { id: doc.id, from_version: 1, content: '{}', updated_at: 2, parts_field: 'epics', parts_key: 'id', parts_chars: 2 }, along),
    );
    await expect(clash).rejects.toThrow(/both name parameter @content/);
    expect(await stored(doc.id)).toEqual(before);
  });
});

describe("a plan's runs of new parts, on Postgres", () => {
  it('reads the orders of all their neighbours in one statement', async () => {
    const doc = await freshDocument('runs');
    await writer.write((sql) => writeNextVersion(sql, 0, null, backlog('a', 'b', 'c', 'd'), doc));
    const from = sent.length;
    // Two runs, each between two stored parts: 'b2' between 'b' and 'c', 'c2' between 'c' and 'd'.
    await writer.write((sql) => writeNextVersion(sql, 1, backlog('a', 'b', 'c', 'd'), backlog('a', 'b', 'b2', 'c', 'c2', 'd'), doc));
    const reads = sent.slice(from).filter((text) => !/\bCOMMIT\b/.test(text) && /^SELECT part_key\b.* FROM document_parts/s.test(text));
    expect(reads).toHaveLength(1);
    expect(JSON.parse((await readWholeDocument(reader, doc.id))!.content)).toEqual(backlog('a', 'b', 'b2', 'c', 'c2', 'd'));
  });
});

type Backlog = ReturnType<typeof backlog>;

/** Version `i` of project `again`'s backlog, written as an answer's apply writes it (engine/operation-steps.ts). */
async function writeVersion(sql: Sql, versions: readonly Backlog[], i: number): Promise<void> {
  const content = versions[i]!;
  await writeDocument(sql, {
    operation: 'test',
    head: await lockDocumentHead(sql, 'again', 'backlog'),
    current: i === 0 ? null : versions[i - 1],
    planned: { content, text: null, split: { layout: BACKLOG_LAYOUT, next: splitDocument(content, BACKLOG_LAYOUT)! }, summary: {} },
    create: { id: 'again-backlog', project_id: 'again', doc_type: 'backlog', doc_key: '' },
    now: 10 + i,
  });
}

describe('a document in parts written twice by one closure, on Postgres', () => {
  it("runs each write's part INSERT with its head's UPDATE; the second write places its part next to the first's", async () => {
    const versions = [backlog('a'), backlog('a', 'b'), backlog('a', 'b', 'c')];
    await writer.write((sql) => writeVersion(sql, versions, 0));
    const from = sent.length;
    await writer.write(async (sql) => {
      writeDocumentsAgain(sql);
      await lockDocumentHeads(sql, [{ project_id: 'again', doc_type: 'backlog', doc_key: '' }]);
      await writeVersion(sql, versions, 1);
      await writeVersion(sql, versions, 2);
    });
    const statements = committedStatements(from).filter((text) => /document_parts|UPDATE documents/.test(text));
    // 'b' after 'a', then 'c' after 'b': each placed from its neighbour by its own INSERT … SELECT.
    expect(statements).toHaveLength(2);
    for (const text of statements)
      expect(text).toMatch(/^WITH changed AS \(UPDATE documents .*written_along AS \(INSERT INTO document_parts .* SELECT .* n\.ord \+ /s);
    expect(JSON.parse((await readWholeDocument(reader, 'again-backlog'))!.content)).toEqual(backlog('a', 'b', 'c'));
    const { head, parts } = await stored('again-backlog');
    expect(head!.version).toBe(3);
    expect(parts.map((p) => [p.part_key, p.version])).toEqual([
      ['a', 1],
      ['b', 2],
      ['c', 3],
    ]);
  });
});
