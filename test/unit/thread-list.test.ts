/**
 * `listThreads` (the threads list of the CLI, the HTTP API and the dashboard): every combination of
 * filters returns what a plain filter over all rows returns, pages by cursor lose and repeat nothing,
 * and every combination's plan reads an index in the list's order (no full scan, no sort), which is
 * what keeps a page fast at any database size (bench target 7 measures it at 1M threads).
 */
import { SqliteSql } from '../../src/db/sql.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import type { ThreadRow } from '../../src/db/schema.js';
import { insertThread, listThreads, threadListQuery, type ThreadListFilter } from '../../src/db/threads.js';

const STATUSES = ['open', 'running', 'complete', 'failed', 'canceled'];
const KINDS = ['story_generate_epic', 'story_generate_all', 'project_briefing'];
const PROJECTS = ['a', 'b', 'c'];

let dir: string;
let db: Db;
let sql: SqliteSql;
let rows: ThreadRow[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cmb-list-'));
  db = openDatabase(join(dir, 'combine.db'));
  sql = new SqliteSql(db);
  applyMigrations(db);
  rows = [];
  for (let i = 0; i < 300; i++) {
    const kind = KINDS[i % 3]!;
    const parent =
      kind === 'story_generate_epic' && i % 4 === 0 && rows.length > 0 ? (rows.filter((r) => r.kind === 'story_generate_all').at(-1)?.id ?? null) : null;
    const row: ThreadRow = {
      id: `t${String(i).padStart(4, '0')}`,
      kind,
      space_type: 'project',
      space_id: PROJECTS[(i * 7) % 3]!,
      target_ref: '{}',
      status: STATUSES[(i * 13) % 5]!,
      parent_thread_id: parent,
      idempotency_key: `k${i}`,
      role: kind === 'story_generate_all' ? 'orchestration' : 'work',
      input: '{}',
      created_by: null,
      traceparent: null,
      created_at: 1_000_000 + Math.floor(i / 3), // three threads share each millisecond: ties by insertion order
      closed_at: null,
    };
    await insertThread(sql, row);
    rows.push(row);
  }
  db.exec('ANALYZE');
});

afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** What the list must be: a plain filter over every row, newest first, ties newest-inserted first. */
function expected(f: ThreadListFilter): string[] {
  const newestFirst = [...rows].reverse();
  return newestFirst
    .filter((r) => !f.active || r.status === 'open' || r.status === 'running')
    .filter((r) => !f.statuses?.length || f.statuses.includes(r.status))
    .filter((r) => f.projectId == null || r.space_id === f.projectId)
    .filter((r) => f.kind == null || r.kind === f.kind)
    .filter((r) => f.parentId == null || r.parent_thread_id === f.parentId)
    .map((r) => r.id);
}

const parentId = () => rows.find((r) => rows.some((c) => c.parent_thread_id === r.id))!.id;

function filters(): ThreadListFilter[] {
  const out: ThreadListFilter[] = [];
  for (const active of [false, true])
    for (const statuses of [undefined, ['failed'], ['failed', 'canceled'], ['open'], ['complete', 'failed'], ['complete']])
      for (const projectId of [null, 'b'])
        for (const kind of [null, 'story_generate_all'])
          for (const parent of [null, parentId()]) out.push({ active, statuses, projectId, kind, parentId: parent, limit: 1000 });
  return out;
}

describe('listThreads', () => {
  it('returns what a plain filter returns, for every combination of filters', async () => {
    for (const f of filters())
      expect(
        (await listThreads(sql, f)).map((r) => r.id),
        JSON.stringify(f),
      ).toEqual(expected(f));
  });

  it('pages by cursor without losing or repeating a thread', async () => {
    for (const f of [
      { active: false, projectId: null, limit: 7 },
      { active: false, projectId: 'a', statuses: ['failed', 'canceled'], limit: 4 },
    ] as ThreadListFilter[]) {
      const seen: string[] = [];
      let cursor: string | null = null;
      for (;;) {
        const page = await listThreads(sql, { ...f, afterThreadId: cursor });
        seen.push(...page.map((r) => r.id));
        if (page.length < f.limit) break;
        cursor = page.at(-1)!.id;
      }
      expect(seen).toEqual(expected(f));
    }
  });

  it('reads an index in list order for every combination: no full scan, no sort', async () => {
    for (const f of [...filters(), { active: false, projectId: null, limit: 50, afterThreadId: 't0100' }]) {
      const q = threadListQuery(f);
      if (!q) continue;
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).all(q.params) as { detail: string }[]).map((p) => p.detail);
      const main = plan.filter(
        (d) => /llm_threads/.test(d) && !/^SEARCH llm_threads USING INTEGER PRIMARY KEY|USING INDEX sqlite_autoindex_llm_threads_1/.test(d),
      );
      expect(
        main.every((d) => /USING (COVERING )?INDEX/.test(d)),
        `${JSON.stringify(f)}: ${plan.join(' | ')}`,
      ).toBe(true);
      expect(plan.some((d) => /TEMP B-TREE/.test(d)) && f.parentId == null, `${JSON.stringify(f)}: ${plan.join(' | ')}`).toBe(false);
    }
  });
});
