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
 *   gone stops it before it waits for a child another transaction holds;
 * - a child canceled before the closure read it: the closure commits whole, that child's lock row released
 *   and its answer not applied, the others ended, the orchestration closed once (failed);
 * - two daemons' closures each ending a child of the same two orchestrations: each locks them in id order
 *   (LOCK ORDER 4 across orchestrations), so neither waits for the other in a cycle, and each closes once.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { LedgerRow, ThreadRow } from '../../src/db/schema.js';
import { endChildrenLockingParents } from '../../src/db/thread-close.js';
import { getThread, insertThread } from '../../src/db/threads.js';
import { readWholeDocument } from '../../src/db/document-parts.js';
import { itemWrites } from '../../src/daemon/engine/item-pipeline.js';
import type { EngineHooks } from '../../src/daemon/engine/tx.js';
import { cancelThread, importProject } from '../../src/daemon/services/commands.js';
import { verifyLedger } from '../../src/ledger/verify.js';
import { project, waitUntil } from '../helpers/harness.js';
import { builtinRegistry } from '../helpers/operations.js';
import { aWriteWaitsForALock, holderThenTwoWrites, testEngineContext } from '../helpers/pg-race.js';
import { type AnswerClosures, useAnswerClosures } from '../helpers/pg-answer-closures.js';
import { testThreadRow } from '../helpers/rows.js';

/**
 * Every thread the `threadsEnded` calls of the committed and rolled-back transactions reported, with the status,
 * in order (a closure's completed children come in one call: each is listed).
 */
let ended: string[] = [];
/** The same calls, one entry per call: the threads' ids, comma-separated, and the status. */
let endedCalls: string[] = [];

const hooks: EngineHooks = {
  threadsEnded: async (_tx, threads: readonly ThreadRow[], status) => {
    for (const t of threads) ended.push(`${t.id}:${status}`);
    endedCalls.push(`${threads.map((t) => t.id).join(',')}:${status}`);
  },
  budgeted: () => false,
};

/** A fresh migrated database with project p imported and orchestration t-o running, for the cases of one describe. */
function useDatabase(): AnswerClosures {
  const c = useAnswerClosures(hooks);
  beforeAll(() => insertThread(c.db.reader, { ...testThreadRow('o'), kind: 'story_generate_all', status: 'running' }));
  return c;
}

/** The items' answers finished together (one shared closure: asked while none runs yet), by `finishes` (d1's unless given); each outcome, or its error as text. */
function finishTogether(
  c: AnswerClosures,
  ids: readonly string[],
  responses: readonly LedgerRow[],
  finishes = itemWrites(c.write, c.ctx, 'postgres'),
): Promise<unknown[]> {
  return Promise.all(
    ids.map((itemId, i) => finishes.finish({ itemId, response: responses[i]!, resumed: false, sent: undefined }).catch((err: unknown) => String(err))),
  );
}

/** The epics of project `projectId`'s story backlog, in order. */
async function epicsOf(c: AnswerClosures, projectId: string): Promise<string[]> {
  const { id } = (await c.db.reader.get<{ id: string }>("SELECT id FROM documents WHERE project_id = ? AND doc_type = 'story_backlog'", [projectId]))!;
  return (JSON.parse((await readWholeDocument(c.db.reader, id))!.content) as { epics: { epic_id: string }[] }).epics.map((e) => e.epic_id);
}

const statusOf = async (c: AnswerClosures, id: string) => (await getThread(c.db.reader, id))!.status;
const mutated = async (c: AnswerClosures) =>
  (await c.db.reader.all<{ work_item_id: string }>('SELECT work_item_id FROM mutations ORDER BY work_item_id')).map((m) => m.work_item_id);

describe('the last children of an orchestration, answered in one closure', () => {
  const c = useDatabase();
  it('end in one statement, and the orchestration closes exactly once', async () => {
    const responses = [await c.answered('a', 1), await c.answered('b', 2), await c.answered('c', 3)];
    ended = [];
    endedCalls = [];
    c.record();
    expect(await finishTogether(c, ['a', 'b', 'c'], responses)).toEqual(['applied', 'applied', 'applied']);
    expect(c.count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(1);
    expect(c.count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(0);
    // Each child's end once, then the orchestration's, once.
    expect(ended).toEqual(['t-a:complete', 't-b:complete', 't-c:complete', 't-o:complete']);
    // The completed children in one call (the app's hook finalizes their runs with one statement).
    expect(endedCalls).toEqual(['t-a,t-b,t-c:complete', 't-o:complete']);
    for (const id of ['t-a', 't-b', 't-c', 't-o']) expect(await statusOf(c, id)).toBe('complete');
    expect(await mutated(c)).toEqual(['a', 'b', 'c']);
    expect(await c.db.reader.all('SELECT scope FROM locks')).toEqual([]);
  });
});

describe('a closure of answers, one of whose items no longer holds its lock row', () => {
  const c = useDatabase();
  it('rolls back, and each step runs again alone: the others applied, that one refused', async () => {
    const responses = [await c.answered('a', 1), await c.answered('b', 2), await c.answered('c', 3)];
    await c.db.reader.run('DELETE FROM locks WHERE owner = ?', ['b']);
    c.record();
    const outcomes = await finishTogether(c, ['a', 'b', 'c'], responses);
    expect(outcomes[0]).toBe('applied');
    expect(outcomes[1]).toMatch(/work item b no longer holds its lock/);
    expect(outcomes[2]).toBe('applied');
    // The closure's statement, then each alone (b's refused in its own).
    expect(c.count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(1);
    expect(c.count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(3);
    expect(await mutated(c)).toEqual(['a', 'c']);
    expect(await statusOf(c, 't-b')).toBe('running');
    expect(await statusOf(c, 't-o')).toBe('running');
  });
});

describe('a closure of answers, one of whose children was canceled since it was read', () => {
  const c = useDatabase();
  it('rolls back on its end guard, and each step runs again alone: the canceled one not applied', async () => {
    const responses = [await c.answered('a', 1), await c.answered('b', 2), await c.answered('c', 3)];
    const finishes = itemWrites(c.write, c.ctx, 'postgres');
    c.record();
    // The closure reads b's thread running; the cancel commits before the closure's ends (its first apply waits for it).
    const blocker = await c.db.pool.connect();
    let outcomes: Promise<unknown[]>;
    try {
      await blocker.query('BEGIN');
      await blocker.query("SELECT 1 FROM documents WHERE project_id = 'p' AND doc_type = 'story_backlog' FOR UPDATE");
      outcomes = finishTogether(c, ['a', 'b', 'c'], responses, finishes);
      // Until the closure waits for the backlog's head (its items and threads read by then).
      const blockerPid = (await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      await waitUntil(async () => ((await aWriteWaitsForALock(c.db.reader, blockerPid)) ? true : null), "the closure to wait for the backlog's head");
      await blocker.query("UPDATE llm_threads SET status = 'canceled', closed_at = 1 WHERE id = 't-b'");
      await blocker.query('COMMIT');
    } finally {
      // A failed wait must not leave the row held: the database could not be dropped after the test.
      await blocker.query('ROLLBACK').catch(() => {});
      blocker.release();
    }
    const settled = await outcomes;
    expect(settled[0]).toBe('applied');
    expect(settled[1]).toBe('canceled');
    expect(settled[2]).toBe('applied');
    // The closure's statement (its guard on b refused it), then a's and c's ends alone; b's lock row released alone.
    expect(c.count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(1);
    expect(c.count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(2);
    expect(await mutated(c)).toEqual(['a', 'c']);
    expect(await statusOf(c, 't-b')).toBe('canceled');
    expect(await c.db.reader.all('SELECT scope FROM locks')).toEqual([]);
  });
});

describe("a closure's end statement, one of whose items no longer holds its lock row", () => {
  const c = useDatabase();
  it('releases every lock row before it touches a thread (LOCK ORDER 3 before 4): it stops without waiting for a child another transaction holds', async () => {
    await c.answered('a', 1);
    await c.answered('b', 2);
    await c.db.reader.run('DELETE FROM locks WHERE owner = ?', ['b']);
    const threads = [(await getThread(c.db.reader, 't-a'))!, (await getThread(c.db.reader, 't-b'))!];
    const ends = threads.map((thread) => {
      const id = thread.id.slice(2);
      return {
        release: { scope: `p:${id}`, owner: id, lost: `work item ${id} lost its lock row` },
        move: { thread, from: 'running' as const, to: 'complete' as const },
      };
    });
    const blocker = await c.db.pool.connect();
    let outcome: string | undefined;
    let end: Promise<string>;
    let first: string;
    try {
      await blocker.query('BEGIN');
      await blocker.query("SELECT 1 FROM llm_threads WHERE id = 't-a' FOR UPDATE");
      end = c
        .write((tx) => endChildrenLockingParents(tx.sql, ends, ['t-o'], tx.now))
        .then(
          () => 'ended',
          (err: unknown) => String(err),
        );
      void end.then((o) => (outcome = o));
      // Until the statement answers, or waits for t-a's row (the order of main's loop: a's release and move, then b's release).
      const blockerPid = (await blocker.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      first = await waitUntil(
        async () => (outcome !== undefined ? 'answered' : (await aWriteWaitsForALock(c.db.reader, blockerPid)) ? 'waited' : null),
        'the end statement to answer, or to wait for the child the blocker holds',
      );
    } finally {
      await blocker.query('ROLLBACK').catch(() => {});
      blocker.release();
    }
    expect(first).toBe('answered');
    expect(await end).toMatch(/work item b lost its lock row/);
    expect(await statusOf(c, 't-a')).toBe('running');
    expect((await c.db.reader.all<{ owner: string }>('SELECT owner FROM locks')).map((l) => l.owner)).toEqual(['a']);
  });
});

describe('a closure of answers, one of whose children was canceled before the closure read it', () => {
  const c = useDatabase();
  it("ends the others together, the canceled one's answer not applied and its lock row released; the orchestration closes once, failed", async () => {
    const responses = [await c.answered('a', 1), await c.answered('b', 2), await c.answered('c', 3)];
    // `combine cancel` of the child (its answer recorded, its call already made): the engine would abort its call, done.
    expect((await c.write((tx) => cancelThread(tx, 't-b'))).abort).toEqual(['b']);
    ended = [];
    c.record();
    expect(await finishTogether(c, ['a', 'b', 'c'], responses)).toEqual(['applied', 'canceled', 'applied']);
    // One closure, committed whole (b's end only releases its lock row): no step ran again alone.
    expect(c.count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(1);
    expect(c.count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(0);
    // b ended with its cancel; a's and c's ends once each, then the orchestration's, once: not every child completed.
    expect(ended).toEqual(['t-a:complete', 't-c:complete', 't-o:failed']);
    expect([await statusOf(c, 't-a'), await statusOf(c, 't-b'), await statusOf(c, 't-c'), await statusOf(c, 't-o')]).toEqual([
      'complete',
      'canceled',
      'complete',
      'failed',
    ]);
    expect(await c.db.reader.all('SELECT id, status, error_code FROM llm_work_items ORDER BY id')).toEqual([
      { id: 'a', status: 'applied', error_code: null },
      { id: 'b', status: 'failed', error_code: 'CANCELED' },
      { id: 'c', status: 'applied', error_code: null },
    ]);
    expect(await mutated(c)).toEqual(['a', 'c']);
    expect(await epicsOf(c, 'p')).toEqual(['E1', 'E3']);
    // b's answer recorded once, then its cancel: nothing applied of it.
    const ofB = await c.db.reader.all<{ entry_type: string; payload: string }>(
      "SELECT entry_type, payload FROM llm_ledger_entries WHERE work_item_id = 'b' ORDER BY seq",
    );
    expect(ofB.map((e) => e.entry_type)).toEqual(['response', 'error']);
    expect(JSON.parse(ofB[1]!.payload)).toMatchObject({ code: 'CANCELED', next: 'canceled' });
    expect(await c.db.reader.all('SELECT scope FROM locks')).toEqual([]);
    expect(await verifyLedger(c.db.reader)).toMatchObject({ ok: true, first_break: null, incomplete: [] });
  });
});

describe("two orchestrations' last children, answered in two daemons' closures, each closure with a child of each", () => {
  // Children of one orchestration writing different documents (as a user operation's children may), so
  // that the two closures share no document head and meet only at the orchestrations (LOCK ORDER 4).
  const c = useAnswerClosures(hooks);
  beforeAll(async () => {
    for (const id of ['q', 'r', 's']) await c.write((tx) => importProject(tx, project(id, 1)));
    for (const id of ['o1', 'o2']) await insertThread(c.db.reader, { ...testThreadRow(id), kind: 'story_generate_all', status: 'running' });
  });
  it('lock the orchestrations in id order: neither closure waits for the other in a cycle, each orchestration closes exactly once', async () => {
    const d2 = testEngineContext('d2', builtinRegistry());
    // d1's closure: a (of o2) and c (of o1): by its children's ids, o2 comes first. d2's: b (of o1) and d (of o2).
    const ofD1 = [await c.answered('a', 1, { parent: 't-o2' }), await c.answered('c', 1, { project: 'q', parent: 't-o1' })];
    const ofD2 = [await c.answered('b', 1, { project: 'r', parent: 't-o1' }, d2), await c.answered('d', 1, { project: 's', parent: 't-o2' }, d2)];
    ended = [];
    c.record();
    const closures: Promise<unknown[]>[] = [];
    // o1 held until both closures wait for it. In id order each takes o1 first; in child order d1 holds o2 while it
    // waits, and once the holder lets go d2 takes o1 and waits for o2: the two closures wait for each other (a cycle).
    await holderThenTwoWrites(
      c.write,
      c.db.reader,
      (tx) => tx.sql.get("SELECT id FROM llm_threads WHERE id = 't-o1' FOR UPDATE"),
      () => (closures[1] = finishTogether(c, ['b', 'd'], ofD2, itemWrites(c.write, d2, 'postgres'))),
      () => (closures[0] = finishTogether(c, ['a', 'c'], ofD1)),
    );
    expect(await Promise.all(closures)).toEqual([
      ['applied', 'applied'],
      ['applied', 'applied'],
    ]);
    // Each closure committed whole: no deadlock broke one, no step ran again alone.
    expect(c.count(/^SELECT combine_release_end_threads_lock_parents\(/)).toBe(2);
    expect(c.count(/^SELECT combine_release_end_thread_lock_parent\(/)).toBe(0);
    // Each child's end once; each orchestration's once (by the closure that committed second).
    expect(ended.toSorted()).toEqual(['t-a:complete', 't-b:complete', 't-c:complete', 't-d:complete', 't-o1:complete', 't-o2:complete']);
    for (const id of ['t-a', 't-b', 't-c', 't-d', 't-o1', 't-o2']) expect(await statusOf(c, id)).toBe('complete');
    for (const id of ['p', 'q', 'r', 's']) expect(await epicsOf(c, id)).toEqual(['E1']);
    expect(await c.db.reader.all('SELECT scope FROM locks')).toEqual([]);
    expect(await verifyLedger(c.db.reader)).toMatchObject({ ok: true, first_break: null, incomplete: [] });
  });
});
