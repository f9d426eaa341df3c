/**
 * Round trips per item on Postgres (issue 18 target 9), counted through a wrapper of the real
 * transaction's handle (every statement still runs on the real connection), what they wrote read back:
 * generate-all's children: their threads and work items are written with one statement per table and
 * chunk of at most 1,000 rows, not one per child (two round trips per item before). A child whose key
 * another transaction's thread takes while the generate-all runs is answered by that thread: the pinned
 * race holds that transaction open until the generate-all's insert waits for it; one whose thread ends
 * before the generate-all reads it back makes the write run again, creating the child anew.
 * Real Postgres, the real submit. (A claim round's: pg-claim-round.)
 */
import { describe, expect, it } from 'vitest';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import type { Tx } from '../../src/daemon/engine/tx.js';
import { cancelThread, importProject } from '../../src/daemon/services/commands.js';
import { submitOperation, type SubmitOptions } from '../../src/daemon/services/submit.js';
import { project, waitUntil } from '../helpers/harness.js';
import { CountingSql, useSubmitDatabase } from '../helpers/pg-counting-sql.js';
import { backendPid, pausedWriteBy, writesWaitingFor } from '../helpers/pg-race.js';

const env = useSubmitDatabase();

const options: SubmitOptions = { force: false, maxQueued: 10_000, deadlineAt: null, createdBy: null, traceparent: null };

/** generate-all of project `p` in one write, its statements counted and its events kept. */
async function generateAll(projectId: string) {
  let sql!: CountingSql;
  const events: EngineEvent[] = [];
  const result = await env.db.write((tx: Tx) => {
    sql = new CountingSql(tx.sql);
    const emit = (e: EngineEvent) => {
      events.push(e);
      tx.emit(e);
    };
    return submitOperation({ ...tx, sql, emit }, env.operations, 'story_generate_all', { project_id: projectId }, options);
  });
  const inserts = (table: string) => sql.texts.filter((t) => t.trimStart().startsWith(`INSERT INTO ${table} `)).length;
  return { parent: result.thread.id, statements: sql.texts.length, threadInserts: inserts('llm_threads'), itemInserts: inserts('llm_work_items'), events };
}

const childrenOf = (parent: string) =>
  env.db.reader.all<{ id: string; status: string; items: number; queued: number }>(
    `SELECT t.id, t.status, count(w.id)::int AS items, count(w.id) FILTER (WHERE w.status = 'queued')::int AS queued
     FROM llm_threads t LEFT JOIN llm_work_items w ON w.thread_id = t.id WHERE t.parent_thread_id = ? GROUP BY t.id ORDER BY t.id`,
    [parent],
  );

/**
 * Project `r` (3 epics) and E2's own run, inserted and held open (`single.go()` commits it): a
 * generate-all's lookup does not see it, its insert waits for it (`pid`'s transaction).
 */
async function epicRunHeldOpen() {
  await env.db.write((tx) => importProject(tx, project('r', 3)));
  const single = pausedWriteBy(
    env.db.write,
    async (tx) => {
      const r = await submitOperation(tx, env.operations, 'story_generate_epic', { project_id: 'r', epic_id: 'E2' }, options);
      return { thread: r.thread.id, pid: await backendPid(tx.sql) };
    },
    async (_tx, a) => a.thread,
  );
  return { single, pid: (await single.reached).pid };
}

describe('generate-all writes its children in a statement per table, not per child', () => {
  it('over 50 epics: one INSERT of the children’s threads and one of their items; each child a thread, a queued item and its events', async () => {
    await env.db.write((tx) => importProject(tx, project('p', 50)));
    const run = await generateAll('p');
    // The orchestration's own thread, then its children's in one statement (51 of each before).
    expect(run.threadInserts).toBe(2);
    expect(run.itemInserts).toBe(1);
    expect(run.statements).toBeLessThan(20);
    const children = await childrenOf(run.parent);
    expect(children).toHaveLength(50);
    expect(children.every((c) => c.status === 'open' && c.items === 1 && c.queued === 1)).toBe(true);
    // Each child's thread event, then its item's, in the epics' order (as one child at a time emitted them).
    const childEvents = run.events.filter((e) => e.parent_thread_id === run.parent);
    expect(childEvents.map((e) => e.type)).toEqual(Array.from({ length: 50 }, () => ['thread', 'work_item']).flat());
    const depth = await env.db.reader.get<{ n: number }>('SELECT coalesce(sum(queued), 0)::int AS n FROM llm_queue_depth');
    expect(depth?.n).toBe(50);
  });

  it('over 1,001 epics: two chunks, at most 1,000 rows a statement', async () => {
    await env.db.write((tx) => importProject(tx, project('big', 1_001)));
    const run = await generateAll('big');
    expect(run.threadInserts).toBe(3);
    expect(run.itemInserts).toBe(2);
    const children = await childrenOf(run.parent);
    expect(children).toHaveLength(1_001);
    expect(children.every((c) => c.items === 1 && c.queued === 1)).toBe(true);
  });

  it('a child whose key another transaction takes meanwhile is answered by that thread, adopted, not inserted twice', async () => {
    const { single, pid } = await epicRunHeldOpen();
    const all = generateAll('r');
    all.catch(() => {});
    await waitUntil(async () => (await writesWaitingFor(env.db.reader, pid)) === 1, 'the generate-all to wait for E2’s run');
    single.go();
    const e2 = await single.done;
    const run = await all;
    const children = await childrenOf(run.parent);
    expect(children).toHaveLength(3);
    expect(children.map((c) => c.id)).toContain(e2);
    expect(children.every((c) => c.items === 1)).toBe(true);
    const e2Runs = await env.db.reader.get<{ n: number }>(
      'SELECT count(*)::int AS n FROM llm_threads WHERE idempotency_key = (SELECT idempotency_key FROM llm_threads WHERE id = ?)',
      [e2],
    );
    expect(e2Runs?.n).toBe(1);
    expect(run.events.filter((e) => e.type === 'work_item' && e.parent_thread_id === run.parent)).toHaveLength(2);
  });

  it('a raced child thread that ends before it is read back: the generate-all runs again and creates that child', async () => {
    const { single, pid } = await epicRunHeldOpen();
    let reachedInsert!: () => void;
    const inserted = new Promise<void>((resolve) => (reachedInsert = resolve));
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    // The first run is held after its children's threads INSERT returned (E2's key skipped: E2's run
    // committed it), before it reads the skipped keys' threads back.
    const heldAfterInsert = async (text: string) => {
      if (!text.trimStart().startsWith('INSERT INTO llm_threads') || !text.includes('jsonb_to_recordset')) return;
      reachedInsert();
      await gate;
    };
    let runs = 0;
    const all = env.db.write((tx: Tx) => {
      runs++;
      const sql = new CountingSql(tx.sql, runs === 1 ? heldAfterInsert : undefined);
      return submitOperation({ ...tx, sql }, env.operations, 'story_generate_all', { project_id: 'r' }, options);
    });
    all.catch(() => {});
    await waitUntil(async () => (await writesWaitingFor(env.db.reader, pid)) === 1, 'the generate-all to wait for E2’s run');
    single.go();
    const e2 = await single.done;
    await inserted;
    // E2's thread ends before the generate-all reads it back: that run fails as a concurrent change (not
    // main's TypeError), and the write runs the closure again, which creates E2's child anew.
    await env.db.write((tx) => cancelThread(tx, e2));
    open();
    const run = await all;
    expect(runs).toBe(2);
    const children = await childrenOf(run.thread.id);
    expect(children).toHaveLength(3);
    expect(children.map((c) => c.id)).not.toContain(e2);
    expect(children.every((c) => c.items === 1)).toBe(true);
  });
});
