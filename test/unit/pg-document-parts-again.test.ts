/**
 * A shared closure of answers that writes one document several times (db/document-parts-queued.ts
 * `writeDocumentsAgain`) queues every part's write for its COMMIT and plans each next version from the
 * places it noted: the document it leaves must be the one the same versions leave written one transaction
 * each — the same parts (keys, order keys, texts, versions), the same head — also when a new element goes
 * between parts the closure itself queued, next to a part it removed, or before any; and for random
 * sequences of versions (removals, changed texts, runs inserted anywhere, keys reused after their removal),
 * from a fixed set of seeds. Real Postgres, the real writer and statements, the engine's document write.
 */
import { describe, expect, it, beforeAll } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { writeDocument } from '../../src/daemon/engine/document-write.js';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { writeDocumentsAgain } from '../../src/db/document-parts-queued.js';
import { insertProject, lockDocumentHead, lockDocumentHeads } from '../../src/db/projects.js';
import { splitDocument } from '../../src/domain/document-parts.js';
import { useTestWriter } from '../helpers/postgres.js';

const db = useTestWriter(4, { raceAttempts: 1 });
const LAYOUT = { field: 'epics', key: 'id' };

type Epic = { id: string; text: string };
type Backlog = { name: string; epics: Epic[] };
const backlog = (...ids: string[]): Backlog => ({ name: 'b', epics: ids.map((id) => ({ id, text: id.endsWith("'") ? 'changed' : id })) });

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
async function writeVersion(sql: Sql, project: string, i: number, versions: readonly Backlog[] = VERSIONS): Promise<void> {
  const head = await lockDocumentHead(sql, project, 'backlog');
  const content = versions[i]!;
  await writeDocument(sql, {
    operation: 'test',
    head,
    current: i === 0 ? null : versions[i - 1],
    planned: { content, text: null, split: { layout: LAYOUT, next: splitDocument(content, LAYOUT)! }, summary: {} },
    create: { id: `${project}-backlog`, project_id: project, doc_type: 'backlog', doc_key: '' },
    now: 10 + i,
  });
}

/**
 * Versions `from`…`to` in one closure that writes documents again, holding the backlog's head (engine/leased.ts
 * `lockTargetDocuments`); the parts the transaction itself sees after its writes, before its COMMIT.
 */
function writeInOneClosure(project: string, from: number, to: number, versions: readonly Backlog[] = VERSIONS): Promise<unknown[]> {
  return db.writer.write(async (sql) => {
    writeDocumentsAgain(sql);
    await lockDocumentHeads(sql, [{ project_id: project, doc_type: 'backlog', doc_key: '' }]);
    for (let i = from; i <= to; i++) await writeVersion(sql, project, i, versions);
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

/** A small linear congruential generator: the same sequence for a seed on every run. */
function random(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** `n` versions of a backlog, each from the one before: some epics removed, some texts changed, 1–3 runs of 1–3 epics inserted anywhere (keys reused after their removal). */
function randomVersions(seed: number, n: number): Backlog[] {
  const r = random(seed);
  const keys = 'abcdefghijklmnopqrstuvwxyz'.split('');
  let epics: Epic[] = [];
  const versions: Backlog[] = [];
  for (let v = 0; v < n; v++) {
    const next = epics.map((e) => ({ ...e }));
    for (let i = next.length - 1; i >= 0; i--) if (r() < 0.2) next.splice(i, 1);
    for (const e of next) if (r() < 0.2) e.text = `t${v}-${Math.floor(r() * 100)}`;
    const runs = 1 + Math.floor(r() * 3);
    for (let k = 0; k < runs; k++) {
      const free = keys.filter((id) => !next.some((e) => e.id === id));
      const added = free
        .sort(() => r() - 0.5)
        .slice(0, 1 + Math.floor(r() * 3))
        .map((id) => ({ id, text: id }));
      next.splice(Math.floor(r() * (next.length + 1)), 0, ...added);
    }
    epics = next;
    versions.push({ name: 'b', epics });
  }
  return versions;
}

describe('random sequences of versions', () => {
  it('one closure, or three committed versions and then one closure: the parts and head of one transaction per version', async () => {
    for (let seed = 1; seed <= 40; seed++) {
      const versions = randomVersions(seed, 9);
      const [each, closure, half] = [`each${seed}`, `closure${seed}`, `half${seed}`];
      for (const id of [each, closure, half]) await insertProject(db.reader, { id, name: id, created_at: 1 });
      for (let i = 0; i < versions.length; i++) await db.writer.write((sql) => writeVersion(sql, each, i, versions));
      await writeInOneClosure(closure, 0, versions.length - 1, versions);
      for (let i = 0; i < 3; i++) await db.writer.write((sql) => writeVersion(sql, half, i, versions));
      await writeInOneClosure(half, 3, versions.length - 1, versions);
      const reference = await stored(each);
      expect(reference.whole, `seed ${seed}`).toEqual(versions.at(-1));
      expect(await stored(closure), `seed ${seed}, one closure`).toEqual(reference);
      expect(await stored(half), `seed ${seed}, three versions then one closure`).toEqual(reference);
    }
  });
});

describe('new epics crowding one place between two parts', () => {
  it('moves a few neighbours apart, in a closure as in one transaction per version, and never writes every part again', async () => {
    // Epic 100 applied before 1…99: each of those goes between the last one and 100, until their orders
    // are too close and the nearest parts are spaced out again (db/document-part-places.ts `spreadNeighbours`).
    const order = [0, 100, ...Array.from({ length: 99 }, (_, i) => i + 1)];
    const versions: Backlog[] = [];
    for (const n of order) {
      const epics = [...(versions.at(-1)?.epics ?? []), { id: `E${String(n).padStart(3, '0')}`, text: `${n}` }];
      versions.push({ name: 'b', epics: epics.sort((a, b) => a.id.localeCompare(b.id)) });
    }
    for (const id of ['crowd-each', 'crowd-even', 'crowd-odd']) await insertProject(db.reader, { id, name: id, created_at: 1 });
    for (let i = 0; i < versions.length; i++) await db.writer.write((sql) => writeVersion(sql, 'crowd-each', i, versions));
    // Two versions per closure, from version 0 or 1: one of the two puts each spread on a closure's second
    // write, which plans from the part its first queued and moves it.
    for (let i = 0; i < versions.length; i += 2) await writeInOneClosure('crowd-even', i, Math.min(i + 1, versions.length - 1), versions);
    await writeInOneClosure('crowd-odd', 0, 0, versions);
    for (let i = 1; i < versions.length; i += 2) await writeInOneClosure('crowd-odd', i, Math.min(i + 1, versions.length - 1), versions);
    const reference = await stored('crowd-each');
    expect(reference.whole).toEqual(versions.at(-1));
    // Each part still has the version that inserted it: none was deleted and written again.
    const inserted = new Map(versions.map((v, i) => [v.epics.find((e) => !versions[i - 1]?.epics.some((p) => p.id === e.id))!.id, i + 1]));
    expect((reference.parts as { part_key: string; version: number }[]).map((p) => [p.part_key, p.version])).toEqual(
      [...inserted].sort(([a], [b]) => a.localeCompare(b)),
    );
    expect(await stored('crowd-even')).toEqual(reference);
    expect(await stored('crowd-odd')).toEqual(reference);
  });
});

/** Epics E000 and E100, then E001…E(last) one by one in order behind E100: their places crowd toward E100's. */
function crowdingVersions(last: number): Backlog[] {
  const epic = (n: number) => ({ id: `E${String(n).padStart(3, '0')}`, text: `${n}` });
  const versions: Backlog[] = [{ name: 'b', epics: [epic(0), epic(100)] }];
  for (let n = 1; n <= last; n++) versions.push({ name: 'b', epics: [...versions.at(-1)!.epics.slice(0, -1), epic(n), epic(100)] });
  return versions;
}

describe('a write that inserts in two places, the second short of room', () => {
  it("keeps its order when the neighbours moved apart for the second include the first one's", async () => {
    // X goes between E038 and E039 (room there), Y between E040 and E100 (none: E037…E040 move apart).
    const versions = crowdingVersions(40);
    const epics = versions.at(-1)!.epics;
    versions.push({ name: 'b', epics: [...epics.slice(0, 39), { id: 'X', text: 'x' }, ...epics.slice(39, -1), { id: 'Y', text: 'y' }, epics.at(-1)!] });
    for (const id of ['two-runs-each', 'two-runs-closure']) await insertProject(db.reader, { id, name: id, created_at: 1 });
    for (let i = 0; i < versions.length; i++) await db.writer.write((sql) => writeVersion(sql, 'two-runs-each', i, versions));
    await writeInOneClosure('two-runs-closure', 0, versions.length - 3, versions);
    await writeInOneClosure('two-runs-closure', versions.length - 2, versions.length - 1, versions);
    const reference = await stored('two-runs-each');
    expect(reference.whole).toEqual(versions.at(-1));
    expect(await stored('two-runs-closure')).toEqual(reference);
  });
});

describe('a part deleted earlier in the closure, among the neighbours a later write moves apart', () => {
  it('is left out of the move: the closure commits the parts of one transaction per version', async () => {
    // Each closure removes the epic two behind the last one (E000 stays) and then adds the next one behind E100: once
    // their places are too close, the neighbours moved apart would include the part the closure deleted.
    const versions = crowdingVersions(1);
    for (let n = 2; n <= 99; n++) {
      const epics = versions.at(-1)!.epics;
      versions.push({ name: 'b', epics: epics.filter((e) => e.id !== `E${String(n - 2).padStart(3, '0')}` || n === 2) });
      versions.push({ name: 'b', epics: [...versions.at(-1)!.epics.slice(0, -1), { id: `E${String(n).padStart(3, '0')}`, text: `${n}` }, epics.at(-1)!] });
    }
    for (const id of ['deleted-each', 'deleted-closure']) await insertProject(db.reader, { id, name: id, created_at: 1 });
    for (let i = 0; i < versions.length; i++) await db.writer.write((sql) => writeVersion(sql, 'deleted-each', i, versions));
    await writeInOneClosure('deleted-closure', 0, 1, versions);
    for (let i = 2; i < versions.length; i += 2) await writeInOneClosure('deleted-closure', i, i + 1, versions);
    const reference = await stored('deleted-each');
    expect(reference.whole).toEqual(versions.at(-1));
    // Each part still has the version that inserted it: none was deleted and written again.
    expect((reference.parts as { part_key: string; version: number }[]).map((p) => p.part_key)).toEqual(['E000', 'E098', 'E099', 'E100']);
    expect((reference.parts as { version: number }[]).map((p) => p.version)).toEqual([1, 2 * 98, 2 * 99, 1]);
    expect(await stored('deleted-closure')).toEqual(reference);
  });
});

describe('a write that inserts in two places, both without room', () => {
  it('moves nothing and writes every part again, as it did before moves existed (the writer has no move queued to undo)', async () => {
    // Two gaps holding no order at all (neighbouring doubles), eight parts apart: more than a first move of
    // neighbours reaches. Then one version adding one epic in each.
    const keys = ['a', 'b', 'p1', 'p2', 'p3', 'p4', 'p5', 'p6', 'p7', 'p8', 'c', 'd'];
    const before = backlog(...keys);
    await insertProject(db.reader, { id: 'two-full', name: 'two-full', created_at: 1 });
    await db.writer.write((sql) => writeVersion(sql, 'two-full', 0, [before]));
    const ords = [1, 1 + Number.EPSILON, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8, 1.9, 1.9 + Number.EPSILON];
    for (const [i, key] of keys.entries()) {
      await db.reader.run('UPDATE document_parts SET ord = ? WHERE document_id = ? AND part_key = ?', [ords[i]!, 'two-full-backlog', key]);
    }
    const versions = [before, backlog('a', 'x', ...keys.slice(1, -1), 'y', 'd')];
    await db.writer.write((sql) => writeVersion(sql, 'two-full', 1, versions));
    const after = await stored('two-full');
    expect(after.whole).toEqual(versions[1]);
    expect((after.parts as { part_key: string }[]).map((p) => p.part_key)).toEqual(versions[1]!.epics.map((e) => e.id));
  });
});
