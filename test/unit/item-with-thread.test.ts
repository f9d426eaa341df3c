/**
 * The engine's one-statement reads and moves of threads: the item with its thread and project (what each
 * step reads first) must be exactly the rows `SELECT *` reads; a thread moves only from the status it is in.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openDatabase, type Db } from '../../src/db/connection.js';
import { getWorkItemWithThread, lockWorkItemsWithThreads } from '../../src/db/item-with-thread.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { SqliteSql } from '../../src/db/sql.js';
import { getThread, insertThread, startThreadsInLockOrder, transitionThreadIfStill } from '../../src/db/threads.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { getProject, insertProject } from '../../src/db/projects.js';
import { getOpenCharge, insertCharge } from '../../src/db/charges.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let dir: string;
let db: Db;
let sql: SqliteSql;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cmb-item-thread-'));
  db = openDatabase(join(dir, 'combine.db'));
  sql = new SqliteSql(db);
  applyMigrations(db);
});
afterEach(() => {
  db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('a work item with its thread', () => {
  it('reads both rows exactly as SELECT * of each does, every column in place', async () => {
    await insertThread(sql, { ...testThreadRow('parent'), role: 'orchestration' });
    // Every column set to a value of its own, so a column read into the wrong field shows.
    await insertThread(sql, {
      ...testThreadRow('a'),
      status: 'running',
      parent_thread_id: 't-parent',
      input: '{"epic":"E-1"}',
      created_by: 'cli',
      traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01',
      target_ref: '{"project_id":"p"}',
      created_at: 11,
      closed_at: 12,
    });
    await insertWorkItem(
      sql,
      testWorkItemRow('a', {
        sequence: 2,
        status: 'running',
        attempt: 3,
        max_attempts: 4,
        repair_count: 1,
        escalated: 1,
        priority: 5,
        not_before: 6,
        deadline_at: 7,
        lease_owner: 'daemon-1',
        lease_expires_at: 8,
        error_code: 'TIMEOUT',
        error_message: 'slow',
        created_at: 9,
        started_at: 10,
        finished_at: 13,
      }),
    );
    await insertProject(sql, { id: 'p', name: 'Payments', created_at: 3 });
    const read = await getWorkItemWithThread(sql, 'a');
    expect(read).toEqual({ item: await getWorkItem(sql, 'a'), thread: await getThread(sql, 't-a'), project: await getProject(sql, 'p') });
    expect(Object.keys(read!.item).sort()).toEqual(Object.keys((await getWorkItem(sql, 'a'))!).sort());
    expect(Object.keys(read!.thread).sort()).toEqual(Object.keys((await getThread(sql, 't-a'))!).sort());
    expect(await getWorkItemWithThread(sql, 'missing')).toBeUndefined();
    // A project deleted since: the item and its thread, no project.
    db.pragma('foreign_keys = OFF');
    db.prepare("DELETE FROM projects WHERE id = 'p'").run();
    expect((await getWorkItemWithThread(sql, 'a'))?.project).toBeNull();
  });
  it('reads several items with their threads in one statement, each as the one-item read does; an unknown id is absent', async () => {
    await insertProject(sql, { id: 'p', name: 'P', created_at: 1 });
    for (const key of ['a', 'b', 'c']) {
      await insertThread(sql, testThreadRow(key));
      await insertWorkItem(sql, testWorkItemRow(key, { project_id: key === 'c' ? 'gone' : 'p' }));
    }
    const reads = await lockWorkItemsWithThreads(sql, ['c', 'a', 'missing', 'b']);
    expect([...reads.keys()].sort()).toEqual(['a', 'b', 'c']);
    for (const id of ['a', 'b', 'c']) expect(reads.get(id)).toEqual(await getWorkItemWithThread(sql, id));
    expect(reads.get('c')!.project).toBeNull();
  });

  it('reads ahead what a step needs: the last ledger entry`s type for the start and the record, the open reservation for the record', async () => {
    await insertProject(sql, { id: 'p', name: 'P', created_at: 1 });
    for (const key of ['a', 'b']) {
      await insertThread(sql, testThreadRow(key));
      await insertWorkItem(sql, testWorkItemRow(key, { project_id: 'p' }));
    }
    const entry = db.prepare(
      `INSERT INTO llm_ledger_entries (seq, thread_id, work_item_id, entry_type, attempt, payload, prev_hash, hash, created_at)
       VALUES (?, 't-a', 'a', ?, 1, '{}', 'x', 'y', 1)`,
    );
    entry.run(1, 'prompt');
    entry.run(2, 'response');
    // Every column its own value, so a column read into the wrong field shows.
    const charge = {
      id: 'c1',
      work_item_id: 'a',
      thread_id: 't-a',
      project_id: 'p',
      model: 'm',
      attempt: 2,
      repair: 3,
      status: 'reserved',
      day: '2026-11-25',
      reserved_tokens: 4,
      reserved_cost_usd: 0.5,
      prompt_tokens: 6,
      completion_tokens: 7,
      total_tokens: 8,
      cost_usd: 0.9,
      response_seq: 10,
      created_at: 11,
      settled_at: 12,
    };
    await insertCharge(sql, charge);
    await insertCharge(sql, { ...charge, id: 'c0', status: 'released', response_seq: null });
    const start = await lockWorkItemsWithThreads(sql, ['a', 'b'], 'start');
    expect([start.get('a')!.lastEntryType, start.get('b')!.lastEntryType]).toEqual(['response', null]);
    expect(start.get('a')!.openCharge).toBeUndefined();
    const record = await lockWorkItemsWithThreads(sql, ['a', 'b'], 'record');
    expect(record.get('a')!.openCharge).toEqual(await getOpenCharge(sql, 'a'));
    expect(Object.keys(record.get('a')!.openCharge!).sort()).toEqual(Object.keys((await getOpenCharge(sql, 'a'))!).sort());
    expect(record.get('b')!.openCharge).toBeNull();
    // The record's too: a `response` there means its answer is already recorded (completer.ts recordResponse).
    expect([record.get('a')!.lastEntryType, record.get('b')!.lastEntryType]).toEqual(['response', null]);
    for (const id of ['a', 'b']) {
      const { item, thread, project } = (await getWorkItemWithThread(sql, id))!;
      expect(record.get(id)).toMatchObject({ item, thread, project });
    }
  });
});

describe('thread moves from a status read earlier', () => {
  it('moves only a thread still in that status, and says whether it did', async () => {
    await insertThread(sql, { ...testThreadRow('a'), status: 'running' });
    expect(await transitionThreadIfStill(sql, { id: 't-a', parent_thread_id: null }, 'open', 'canceled', 5)).toBe(false);
    expect((await getThread(sql, 't-a'))?.status).toBe('running');
    expect(await transitionThreadIfStill(sql, { id: 't-a', parent_thread_id: null }, 'running', 'complete', 5)).toBe(true);
    expect(await getThread(sql, 't-a')).toMatchObject({ status: 'complete', closed_at: 5 });
  });

  it('starts children and their open parent in one statement; a later start finds the parent running and changes nothing', async () => {
    await insertThread(sql, testThreadRow('p'));
    for (const c of ['c1', 'c2', 'c3']) await insertThread(sql, { ...testThreadRow(c), parent_thread_id: 't-p' });
    const starts = (ids: string[]) => ({ children: ids, start: ids, startParents: ['t-p'], closeParents: [] });
    const moved = await startThreadsInLockOrder(sql, starts(['t-c1', 't-c2']));
    expect(moved.map((t) => [t.id, t.status]).sort()).toEqual([
      ['t-c1', 'running'],
      ['t-c2', 'running'],
      ['t-p', 'running'],
    ]);
    expect((await startThreadsInLockOrder(sql, starts(['t-c3']))).map((t) => t.id)).toEqual(['t-c3']);
    // A child that is not open any more is not moved (its caller's guard: engine/starts.ts startThreads).
    expect(await startThreadsInLockOrder(sql, starts(['t-c1']))).toEqual([]);
  });
});
