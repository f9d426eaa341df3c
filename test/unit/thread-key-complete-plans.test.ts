/**
 * SQLite's plans of the statements that look a request key up among complete threads, and of `ledger
 * verify`'s check of complete threads. The first three must read idx_threads_key_complete (the request
 * key of complete threads only): a repeated request's dedup look-ups (single and bulk) and retention's
 * "keep the newest completion". A partial index serves a statement only when its WHERE implies the
 * index's predicate (SQLite compares a bound status by its value, re-preparing the statement, so
 * `status = ?` bound to 'complete' still qualifies there; Postgres's generic plan would not): a predicate
 * that stopped implying it, or the index gone, would turn every submit's look-up into a scan of
 * llm_threads while every other test still passed. The ledger check must scan llm_threads without an
 * index: most threads are complete, and a walk of the partial index with a row read per entry was
 * 1.4–1.7× slower at 1,000,000 threads. The statements are taken as the connection's statement cache
 * holds them after each db/ function has run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { listPrunableRoots } from '../../src/db/retention.js';
import { SqliteSql } from '../../src/db/sql.js';
import { statementCache } from '../../src/db/statements.js';
import { findLatestCompleteThreadByKey, insertThread, latestCompleteThreadsByKeys, listCompleteThreadsWithoutAppliedItem } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

const THREADS = 2000;

let dir: string;
let db: Db;
let sql: SqliteSql;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'cmb-key-plans-'));
  db = openDatabase(join(dir, 'combine.db'));
  sql = new SqliteSql(db);
  applyMigrations(db);
  // As in a long-lived database: most threads complete with an applied item, their keys repeated; a few
  // open, each with a key of its own (one active thread per key).
  for (let i = 0; i < THREADS; i++) {
    const status = i % 20 === 0 ? 'open' : 'complete';
    const key = status === 'open' ? `open${i}` : `k${i % 500}`;
    await insertThread(sql, { ...testThreadRow(`${i}`), idempotency_key: key, status, created_at: i, closed_at: status === 'open' ? null : i });
    await insertWorkItem(sql, testWorkItemRow(`${i}`, { status: status === 'open' ? 'queued' : 'applied' }));
  }
  // No ANALYZE: the daemon never runs it, so SQLite plans without statistics, as here.
});

afterAll(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs `call`, then returns the plan of the one statement it added to the connection's cache. */
async function planOf(call: () => Promise<unknown>, params: unknown[] | Record<string, unknown>): Promise<string[]> {
  const before = new Set(statementCache(db).keys());
  await call();
  const added = [...statementCache(db).keys()].filter((t) => !before.has(t));
  expect(added).toHaveLength(1);
  return (db.prepare(`EXPLAIN QUERY PLAN ${added[0]}`).all(params) as { detail: string }[]).map((r) => r.detail);
}

describe('plans of the complete threads of a request key (SQLite)', () => {
  it("a repeated request's newest complete thread reads idx_threads_key_complete", async () => {
    const plan = await planOf(() => findLatestCompleteThreadByKey(sql, 'k7'), ['k7']);
    expect(plan.join(' | ')).toMatch(/^SEARCH llm_threads USING INDEX idx_threads_key_complete \(idempotency_key=\?\)$/);
  });

  it('the newest complete thread of many keys at once reads idx_threads_key_complete', async () => {
    const keys = ['k1', 'k2', 'k3'];
    const plan = await planOf(() => latestCompleteThreadsByKeys(sql, keys), { keys: JSON.stringify(keys) });
    expect(plan, plan.join(' | ')).toContain('SEARCH llm_threads USING INDEX idx_threads_key_complete (idempotency_key=?)');
    expect(
      plan.filter((d) => /^SCAN llm_threads/.test(d)),
      plan.join(' | '),
    ).toEqual([]);
  });

  it("retention's newest-completion check reads idx_threads_key_complete", async () => {
    const plan = await planOf(() => listPrunableRoots(sql, THREADS, 10), { cutoff: THREADS, limit: 10 });
    // The outer walk of the roots (SCAN r and its sort by closed_at) is the statement's own; the check
    // of a newer completion of the same key (table alias n) is looked up by key.
    expect(plan, plan.join(' | ')).toContain('SEARCH n USING INDEX idx_threads_key_complete (idempotency_key=?)');
    expect(
      plan.filter((d) => /^SCAN n\b/.test(d)),
      plan.join(' | '),
    ).toEqual([]);
  });

  it("ledger verify's complete threads without an applied item scan llm_threads, not the partial index", async () => {
    const plan = await planOf(() => listCompleteThreadsWithoutAppliedItem(sql), []);
    expect(plan, plan.join(' | ')).toContain('SCAN t');
    expect(
      plan.filter((d) => /idx_threads_key_complete/.test(d)),
      plan.join(' | '),
    ).toEqual([]);
  });
});
