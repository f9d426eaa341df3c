/**
 * A Postgres shared closure of answers ends its items' threads together after its last step, in one
 * statement (engine/ends-together.ts, migrations/pg/0020): every child's lock row released and its thread
 * ended, then each orchestration locked once for its close check. Pinned with the real shared closure
 * (`itemWrites`), the real writer and the built-in `story_generate_epic`:
 * - the last three children of an orchestration in one closure: each ended once, the orchestration closed
 *   exactly once (one `threadsEnded` of it), every lock row gone;
 * - one item of the closure no longer holds its lock row: the statement refuses it, the closure rolls back,
 *   and each item's step runs again alone — the others applied, that one refused, nothing of it committed;
 * - a child canceled since the closure read it: the closure rolls back (its end's guard), and each step runs
 *   again alone — the others applied, the canceled one's answer not applied;
 * - the statement takes its rows in LOCK ORDER, literally: every lock row before any thread, so a lock row
 *   gone stops it before it waits for a child another transaction holds.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/core/clock.js';
import { writeTx } from '../../src/core/tx.js';
import { forgetDocuments } from '../../src/db/document-cache.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import type { LedgerRow, ThreadRow } from '../../src/db/schema.js';
import { endChildrenLockingParents } from '../../src/db/thread-close.js';
import { getThread, insertThread } from '../../src/db/threads.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import { itemWrites } from '../../src/daemon/engine/item-pipeline.js';
import { importProject } from '../../src/daemon/services/commands.js';
import type { EngineHooks, Write } from '../../src/daemon/engine/tx.js';
import { project, waitUntil } from '../helpers/harness.js';
import { builtinRegistry } from '../helpers/operations.js';
import { aWriteWaitsForALock, openRaceDatabase, type RaceDatabase, storiesAnswered, testEngineContext } from '../helpers/pg-race.js';
import { testThreadRow } from '../helpers/rows.js';

let db: RaceDatabase;
let write: Write;
/** Every `threadsEnded` call of the committed and rolled-back transactions: the threads' ids and the status. */
let ended: string[] = [];
/** The SQL text of every statement sent (`combine_release_end_thread…` calls counted from it). */
let sent: string[] = [];

const hooks: EngineHooks = {
  threadsEnded: async (_tx, threads: readonly ThreadRow[], status) => {
    ended.push(`${threads.map((t) => t.id).join(',')}:${status}`);
  },
  budgeted: () => false,
};

/** A fresh migrated database with project p imported, for the cases of one describe. */
function useDatabase(): void {
  beforeAll(async () => {
    db = await openRaceDatabase();
    db.pool.on('acquire', (client) => {
      const marked = client as unknown as { recorded?: true; query: (...args: unknown[]) => unknown };
      if (marked.recorded) return;
      marked.recorded = true;
      const query = marked.query.bind(client);
      marked.query = (config: unknown, ...rest: unknown[]) => {
        sent.push(typeof config === 'string' ? config : (config as { text: string }).text);
        return query(config, ...rest);
      };
    });
    const pgWriter = new PgWriter<EngineEvent>(db.pool, { conflictAttempts: 1, raceAttempts: 1, onRollback: (connection) => forgetDocuments({ connection }) });
    write = writeTx(pgWriter, systemClock, hooks);
    await write((tx) => importProject(tx, project('p', 4)));
    await insertThread(db.reader, { ...testThreadRow('o'), kind: 'story_generate_all', status: 'running' });
  });
  afterAll(() => db?.drop());
}

const ctx = testEngineContext('d1', builtinRegistry());

const answered = (id: string, epic: number) => storiesAnswered(db.reader, write, ctx, id, epic);

/** The three items' answers finished together (one shared closure: asked while none runs yet). */
async function finishTogether(ids: readonly string[], responses: readonly LedgerRow[]): Promise<unknown[]> {
  const finishes = itemWrites(write, ctx, 'postgres');
  ended = [];
  sent = [];
  return Promise.all(
    ids.map((itemId, i) => finishes.finish({ itemId, response: responses[i]!, resumed: false, sent: undefined }).catch((err: unknown) => String(err))),
  );
}

const count = (pattern: RegExp) => sent.filter((text) => pattern.test(text)).length;
const statusOf = async (id: string) => (await getThread(db.reader, id))!.status;
const mutated = async () =>
  (await db.reader.all<{ work_item_id: string }>('SELECT work_item_id FROM mutations ORDER BY work_item_id')).map((m) => m.work_item_id);

describe('the last children of an orchestration, answered in one closure', () => {
  useDatabase();
  it('end in one statement, and the orchestration closes exactly once', async () => {
    const responses = [await answered('a', 1), await answered('b', 2), await answered('c', 3)];
    expect(await finishTogether(['a', 'b', 'c'], responses)).toEqual(['applied', 'applied', 'applied']);
    expect(count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(1);
    expect(count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(0);
    // Each child's end once (the hook once per thread, as alone), then the orchestration's, once.
    expect(ended).toEqual(['t-a:complete', 't-b:complete', 't-c:complete', 't-o:complete']);
    for (const id of ['t-a', 't-b', 't-c', 't-o']) expect(await statusOf(id)).toBe('complete');
    expect(await mutated()).toEqual(['a', 'b', 'c']);
    expect(await db.reader.all('SELECT scope FROM locks')).toEqual([]);
  });
});

describe('a closure of answers, one of whose items no longer holds its lock row', () => {
  useDatabase();
  it('rolls back, and each step runs again alone: the others applied, that one refused', async () => {
    const responses = [await answered('a', 1), await answered('b', 2), await answered('c', 3)];
    await db.reader.run('DELETE FROM locks WHERE owner = ?', ['b']);
    const outcomes = await finishTogether(['a', 'b', 'c'], responses);
    expect(outcomes[0]).toBe('applied');
    expect(outcomes[1]).toMatch(/work item b no longer holds its lock/);
    expect(outcomes[2]).toBe('applied');
    // The closure's statement, then each alone (b's refused in its own).
    expect(count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(1);
    expect(count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(3);
    expect(await mutated()).toEqual(['a', 'c']);
    expect(await statusOf('t-b')).toBe('running');
    expect(await statusOf('t-o')).toBe('running');
  });
});

describe('a closure of answers, one of whose children was canceled since it was read', () => {
  useDatabase();
  it('rolls back on its end guard, and each step runs again alone: the canceled one not applied', async () => {
    const responses = [await answered('a', 1), await answered('b', 2), await answered('c', 3)];
    const finishes = itemWrites(write, ctx, 'postgres');
    ended = [];
    sent = [];
    // The closure reads b's thread running; the cancel commits before the closure's ends (its first apply waits for it).
    const blocker = await db.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query("SELECT 1 FROM documents WHERE project_id = 'p' AND doc_type = 'story_backlog' FOR UPDATE");
    const outcomes = Promise.all(
      ['a', 'b', 'c'].map((itemId, i) =>
        finishes.finish({ itemId, response: responses[i]!, resumed: false, sent: undefined }).catch((err: unknown) => String(err)),
      ),
    );
    // Until the closure waits for the backlog's head (its items and threads read by then).
    const blockerPid = (await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    await waitUntil(async () => ((await aWriteWaitsForALock(db.reader, blockerPid)) ? true : null), "the closure to wait for the backlog's head");
    await blocker.query("UPDATE llm_threads SET status = 'canceled', closed_at = 1 WHERE id = 't-b'");
    await blocker.query('COMMIT');
    blocker.release();
    const settled = await outcomes;
    expect(settled[0]).toBe('applied');
    expect(settled[1]).toBe('canceled');
    expect(settled[2]).toBe('applied');
    // The closure's statement (its guard on b refused it), then a's and c's ends alone; b's lock row released alone.
    expect(count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(1);
    expect(count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(2);
    expect(await mutated()).toEqual(['a', 'c']);
    expect(await statusOf('t-b')).toBe('canceled');
    expect(await db.reader.all('SELECT scope FROM locks')).toEqual([]);
  });
});

describe("a closure's end statement, one of whose items no longer holds its lock row", () => {
  useDatabase();
  it('releases every lock row before it touches a thread (LOCK ORDER 3 before 4): it stops without waiting for a child another transaction holds', async () => {
    await answered('a', 1);
    await answered('b', 2);
    await db.reader.run('DELETE FROM locks WHERE owner = ?', ['b']);
    const threads = [(await getThread(db.reader, 't-a'))!, (await getThread(db.reader, 't-b'))!];
    const blocker = await db.pool.connect();
    await blocker.query('BEGIN');
    await blocker.query("SELECT 1 FROM llm_threads WHERE id = 't-a' FOR UPDATE");
    const ends = threads.map((thread) => {
      const id = thread.id.slice(2);
      return {
        release: { scope: `p:${id}`, owner: id, lost: `work item ${id} lost its lock row` },
        move: { thread, from: 'running' as const, to: 'complete' as const },
      };
    });
    let outcome: string | undefined;
    const end = write((tx) => endChildrenLockingParents(tx.sql, ends, ['t-o'], tx.now)).then(
      () => 'ended',
      (err: unknown) => String(err),
    );
    void end.then((o) => (outcome = o));
    // Until the statement answers, or waits for t-a's row (the order of main's loop: a's release and move, then b's release).
    let waited = false;
    while (outcome === undefined && !waited) {
      const waiting = await db.reader.all(
        "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%combine_release_end_threads_lock_parents%'",
      );
      waited = waiting.length > 0;
      await new Promise((r) => setTimeout(r, 10));
    }
    await blocker.query('ROLLBACK');
    blocker.release();
    expect(waited).toBe(false);
    expect(await end).toMatch(/work item b lost its lock row/);
    expect(await statusOf('t-a')).toBe('running');
    expect((await db.reader.all<{ owner: string }>('SELECT owner FROM locks')).map((l) => l.owner)).toEqual(['a']);
  });
});
