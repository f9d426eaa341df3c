/**
 * The fair scheduler's candidates on SQLite (`listClaimHeads`, `listProjectClaimHeads`: one statement
 * each) against their definition, computed here from every row: for each (project, priority) group of
 * queued items, the oldest one that is due, not past its deadline, not held back, and whose lock scope
 * no live holder has. Real SQLite file; queues drawn from a seeded generator.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import type { WorkItemRow } from '../../src/db/schema.js';
import { SqliteSql } from '../../src/db/sql.js';
import { statementCache } from '../../src/db/statements.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { listClaimHeads, listProjectClaimHeads, type ClaimHead } from '../../src/db/work-item-claims.js';
import { testWorkItemRow } from '../helpers/rows.js';
import { seededRandom } from '../helpers/seeded.js';

let dir: string;
let db: Db;
let sql: SqliteSql;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cmb-claim-heads-'));
  db = openDatabase(join(dir, 'combine.db'));
  sql = new SqliteSql(db);
  applyMigrations(db);
  // Items without threads: the heads read only the items and the locks.
  db.pragma('foreign_keys = OFF');
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The heads by their definition, in (project, priority) order. */
function expectedHeads(now: number, project: string | null, excluded: ReadonlySet<string>): ClaimHead[] {
  const items = db.prepare('SELECT * FROM llm_work_items').all() as WorkItemRow[];
  const locks = db.prepare('SELECT scope, expires_at FROM locks').all() as { scope: string; expires_at: number | null }[];
  const held = new Set(locks.filter((l) => l.expires_at === null || l.expires_at > now).map((l) => l.scope));
  const groups = new Map<string, WorkItemRow[]>();
  for (const w of items) {
    if (w.status !== 'queued' || (project !== null && w.project_id !== project)) continue;
    const key = JSON.stringify([w.project_id, w.priority]);
    groups.set(key, [...(groups.get(key) ?? []), w]);
  }
  const heads: ClaimHead[] = [];
  for (const key of [...groups.keys()].sort(byGroup)) {
    const runnable = groups
      .get(key)!
      .filter((w) => w.not_before <= now && (w.deadline_at === null || w.deadline_at > now) && !excluded.has(w.id) && !held.has(w.lock_scope))
      .sort((a, b) => a.not_before - b.not_before);
    const head = runnable[0];
    // Of several due at the same time, the statement may take any: compare by the due time then.
    if (head) heads.push({ id: head.id, project_id: head.project_id, priority: head.priority, not_before: head.not_before, lock_scope: head.lock_scope });
  }
  return heads;
}

function byGroup(a: string, b: string): number {
  const [pa, qa] = JSON.parse(a) as [string, number];
  const [pb, qb] = JSON.parse(b) as [string, number];
  return pa < pb ? -1 : pa > pb ? 1 : qa - qb;
}

describe('claim heads on SQLite', () => {
  it('are, for every group, its oldest runnable queued item, in group order — with and without held-back items', async () => {
    const random = seededRandom(7);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    let compared = 0;
    for (let round = 0; round < 30; round++) {
      db.exec('DELETE FROM llm_work_items; DELETE FROM locks;');
      const projects = ['', 'a', 'b', 'c', 'd'].slice(0, 1 + Math.floor(random() * 5));
      const scopes = ['s1', 's2', 's3', 's4', 's5'];
      const ids: string[] = [];
      for (let i = 0; i < Math.floor(random() * 60); i++) {
        const id = `i${round}-${i}`;
        ids.push(id);
        // Distinct due times, so each group's head is one item.
        await insertWorkItem(
          sql,
          testWorkItemRow(id, {
            sequence: i,
            status: pick(['queued', 'queued', 'queued', 'claimed', 'running', 'applied'] as const),
            lock_scope: pick(scopes),
            project_id: pick(projects),
            priority: pick([0, 0, 1, 2, 5]),
            not_before: i * 7 + Math.floor(random() * 5),
            deadline_at: random() < 0.2 ? Math.floor(random() * 500) : null,
          }),
        );
      }
      for (const scope of scopes) {
        if (random() < 0.3)
          db.prepare('INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES (?, ?, 0, ?)').run(
            scope,
            'o',
            random() < 0.3 ? null : Math.floor(random() * 500),
          );
      }
      for (let k = 0; k < 5; k++) {
        const now = Math.floor(random() * 500);
        expect(await listClaimHeads(sql, now)).toEqual(expectedHeads(now, null, new Set()));
        const project = pick(projects);
        const excluded = random() < 0.5 ? [] : ids.filter(() => random() < 0.3);
        expect(await listProjectClaimHeads(sql, project, now, excluded)).toEqual(expectedHeads(now, project, new Set(excluded)));
        compared += 2;
      }
    }
    expect(compared).toBe(300);
  });

  it('walk the index a seek per group: the next group is a range seek, each head one seek in due order', async () => {
    // 20,000 queued items in two projects, two priorities each: four groups.
    const insert = db.prepare(
      `INSERT INTO llm_work_items (id, thread_id, sequence, status, attempt, max_attempts, repair_count, escalated, lock_scope, project_id, priority, not_before, created_at)
       VALUES (?, ?, ?, 'queued', 1, 3, 0, 0, ?, ?, ?, ?, 0)`,
    );
    db.transaction(() => {
      for (let i = 0; i < 20_000; i++) insert.run(`w${i}`, `t${i}`, i, `s${i}`, `p${i % 2}`, (i >> 1) % 2, i);
    })();
    expect((await listClaimHeads(sql, 100)).map((h) => [h.project_id, h.priority, h.id])).toEqual([
      ['p0', 0, 'w0'],
      ['p0', 1, 'w2'],
      ['p1', 0, 'w1'],
      ['p1', 1, 'w3'],
    ]);
    expect((await listProjectClaimHeads(sql, 'p1', 100, ['w1'])).map((h) => h.id)).toEqual(['w5', 'w3']);
    // The plans (the statements as the cache holds them): a step to the next group never walks a
    // project's queued entries — a row-value range `(project_id, priority) > (?, ?)` would.
    const texts = [...statementCache(db).keys()].filter((t) => t.startsWith('WITH RECURSIVE g'));
    expect(texts).toHaveLength(2);
    for (const text of texts) {
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${text}`).all({ now: 0, project_id: 'p', excluded: '[]' }) as { detail: string }[]).map((r) => r.detail);
      expect(plan).toContain('SEARCH x USING COVERING INDEX idx_work_items_fair (project_id=? AND priority>?)');
      expect(plan).toContain('SEARCH h USING INDEX idx_work_items_fair (project_id=? AND priority=? AND not_before<?)');
      expect(plan).toContain('SEARCH w USING INTEGER PRIMARY KEY (rowid=?)');
    }
  });
});
