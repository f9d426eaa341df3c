/**
 * Where a backlog's new epics go when they arrive out of order (the fair scheduler, several daemons, a
 * retry or `generate-epic --force` apply one project's epics in any order): each write inserts its
 * epic's part and moves at most a few neighbours' places, never deleting and writing every part again.
 * Real SQLite file, the engine's own write of a planned mutation.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { lockDocumentHead, insertProject } from '../../src/db/projects.js';
import { SqliteSql } from '../../src/db/sql.js';
import { writeDocument } from '../../src/daemon/engine/document-write.js';
import { splitDocument } from '../../src/domain/document-parts.js';

const layout = { field: 'epics', key: 'epic_id' };
const EPICS = 480;
const id = (i: number) => `E${String(i).padStart(3, '0')}`;

interface Part {
  part_key: string;
  ord: number;
  row_id: number;
}

describe('a backlog stored in parts, its epics applied out of order', () => {
  let dir: string;
  let db: Db;
  let sql: SqliteSql;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cmb-parts-places-'));
    db = openDatabase(join(dir, 'c.db'));
    sql = new SqliteSql(db);
    applyMigrations(db);
    await insertProject(sql, { id: 'p', name: 'P', created_at: 0 });
  });
  afterEach(() => {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const parts = async () => new Map((await sql.all<Part>('SELECT part_key, ord, rowid AS row_id FROM document_parts')).map((p) => [p.part_key, p]));

  /** Applies epic `i` as story_generate_epic does: the other epics kept (the same objects), this one in its place. */
  async function apply(current: { epics: readonly { epic_id: string }[] }, i: number, now: number) {
    const entry = Object.freeze({ epic_id: id(i), stories: [{ title: `story of ${id(i)} at ${now}` }] });
    const at = current.epics.findIndex((e) => e.epic_id === entry.epic_id);
    const epics = [...current.epics];
    if (at !== -1) epics.splice(at, 1, entry);
    else epics.splice(epics.filter((e) => e.epic_id < entry.epic_id).length, 0, entry);
    return write(current, { epics }, now);
  }

  /** Writes `content` over `current` as an answer's apply does (engine/document-write.ts), and returns it. */
  async function write<T extends { epics: readonly { epic_id: string }[] }>(current: { epics: readonly { epic_id: string }[] }, content: T, now: number) {
    const head = await lockDocumentHead(sql, 'p', 'story_backlog');
    await writeDocument(sql, {
      operation: 'story_generate_epic',
      head,
      current,
      planned: { content, text: null, split: { layout, next: splitDocument(content, layout)! }, summary: {} },
      create: { id: 'd', project_id: 'p', doc_type: 'story_backlog', doc_key: '' },
      now,
    });
    return content;
  }

  /** Applies the epics in `order`, and returns the most parts one write deleted and moved, and all it moved. */
  async function applyAll(order: readonly number[]) {
    let current: { epics: readonly { epic_id: string }[] } = { epics: [] };
    let mostDeleted = 0;
    let mostMoved = 0;
    let totalMoved = 0;
    for (const [n, i] of order.entries()) {
      const before = await parts();
      current = await apply(current, i, n);
      const after = await parts();
      mostDeleted = Math.max(mostDeleted, [...before.values()].filter((p) => after.get(p.part_key)?.row_id !== p.row_id).length);
      const moved = [...before.values()].filter((p) => after.get(p.part_key)?.ord !== p.ord).length;
      mostMoved = Math.max(mostMoved, moved);
      totalMoved += moved;
    }
    return { mostDeleted, mostMoved, totalMoved, current };
  }

  it('fills a gap in order behind an epic applied early without writing the backlog again', async () => {
    // E100 is applied before E001..E099: each of those goes between the last one and E100.
    const order = [0, 100, ...Array.from({ length: EPICS }, (_, i) => i).filter((i) => i !== 0 && i !== 100)];
    const { mostDeleted, mostMoved, current } = await applyAll(order);
    expect(mostDeleted).toBe(0);
    expect(mostMoved).toBeLessThanOrEqual(64);
    const whole = await readWholeDocument(sql, 'd');
    expect(whole?.version).toBe(EPICS);
    expect(JSON.parse(whole!.content)).toEqual(current);
    expect(current.epics.map((e) => e.epic_id)).toEqual(Array.from({ length: EPICS }, (_, i) => id(i)));
  });

  it('keeps the places of two streams of epics that interleave, and of epics applied again', async () => {
    // Two daemons each working through half of the project's epics, then every tenth epic again (--force).
    const order = Array.from({ length: EPICS / 2 }, (_, i) => [i, EPICS / 2 + i]).flat();
    const again = Array.from({ length: EPICS / 10 }, (_, i) => i * 10);
    const { mostDeleted, mostMoved, current } = await applyAll([...order, ...again]);
    expect(mostDeleted).toBe(0);
    expect(mostMoved).toBeLessThanOrEqual(64);
    const whole = await readWholeDocument(sql, 'd');
    expect(whole?.version).toBe(order.length + again.length);
    expect(JSON.parse(whole!.content)).toEqual(current);
  });

  it('never writes the backlog again when epics close in from both ends, and moves few places per write', async () => {
    // The worst order for places between neighbours: every epic goes between the last two applied.
    const order = [0, EPICS - 1, ...Array.from({ length: EPICS / 2 - 1 }, (_, i) => [i + 1, EPICS - 2 - i]).flat()];
    const { mostDeleted, totalMoved, current } = await applyAll(order);
    expect(mostDeleted).toBe(0);
    // Moved places are amortized: a crowded place spreads out to a sparser neighbourhood now and then.
    expect(totalMoved / order.length).toBeLessThanOrEqual(4);
    expect(JSON.parse((await readWholeDocument(sql, 'd'))!.content)).toEqual(current);
  });

  it("keeps the order of a write that inserts in two places when the second one moves the first one's neighbours apart", async () => {
    // E001…E040 in order behind E100 leave E038…E040 crowded; then one write adds X between E038 and E039
    // (room there) and Y between E040 and E100 (none: its neighbours, E038 and E039 among them, move apart).
    const { current } = await applyAll([0, 100, ...Array.from({ length: 40 }, (_, i) => i + 1)]);
    const x = Object.freeze({ epic_id: 'X' });
    const y = Object.freeze({ epic_id: 'Y' });
    const content = { epics: [...current.epics.slice(0, 39), x, ...current.epics.slice(39, -1), y, current.epics.at(-1)!] };
    expect(current.epics.slice(37).map((e) => e.epic_id)).toEqual([id(37), id(38), id(39), id(40), id(100)]);
    await write(current, content, 100);
    expect(JSON.parse((await readWholeDocument(sql, 'd'))!.content)).toEqual(content);
  });
});
