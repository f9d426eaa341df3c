/**
 * Round trips per item on Postgres (issue 18 target 9), counted through a wrapper of the real
 * transaction's handle (every statement still runs on the real connection), what they wrote read back:
 * - generate-all's children: their threads and work items are written with one statement per table and
 *   chunk of at most 1,000 rows, not one per child (two round trips per item before). A child whose key
 *   another transaction's thread takes while the generate-all runs is answered by that thread: the pinned
 *   race holds that transaction open until the generate-all's insert waits for it; one whose thread ends
 *   before the generate-all reads it back makes the write run again, creating the child anew;
 * - a claim round: each claim's candidate read brings its group's next head, so the round reads the heads
 *   once, not its project's again after every claim (one round trip per claimed item before); an item of a
 *   project without a budget is read and claimed in one statement (two round trips per item before), and
 *   one its route then holds back (a 429's park shared by the daemons) is left as it was: queued, no lease,
 *   its scope free;
 * - sharing the database, an own project whose item is held back (here its budget lock busy) competes as
 *   any other for the rest of the round: the round reads one of its items, not all of them first.
 * Real Postgres, the real submit and claim round.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RunResult, Sql, SqlParams } from '../../src/core/sql.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { flowControlOf } from '../../src/daemon/config/flow.js';
import { claimWorkItems, type FlowControl } from '../../src/daemon/engine/producer.js';
import { createModelRouter } from '../../src/daemon/routing/wiring.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import type { Tx } from '../../src/daemon/engine/tx.js';
import { cancelThread, importProject } from '../../src/daemon/services/commands.js';
import { submitOperation, type SubmitOptions } from '../../src/daemon/services/submit.js';
import { loadOperations } from '../../src/operations/loader.js';
import type { OperationRegistry } from '../../src/operations/registry.js';
import { project, waitUntil } from '../helpers/harness.js';
import { backendPid, NO_HOOKS, oneAttemptWrite, openRaceDatabase, pausedWriteBy, type RaceDatabase, writesWaitingFor } from '../helpers/pg-race.js';
import { assignProjectOwners, OwnProjects } from '../../src/domain/project-owners.js';
import { lockKeyForTransaction } from '../../src/db/key-locks.js';
import { sharedRateLimits } from '../../src/daemon/engine/shared-rate-limits.js';

let db: RaceDatabase;
let home: string;
let operations: OperationRegistry;
beforeEach(async () => {
  db = await openRaceDatabase();
  home = mkdtempSync(join(tmpdir(), 'cmb-generate-all-statements-'));
  operations = await loadOperations(home, [], operationSettingsOf(loadConfig(home, {})));
});
afterEach(async () => {
  rmSync(home, { recursive: true, force: true });
  await db?.drop();
});

/** The 429-parked round's round trips (see its test): the heads' read; a1 claimed, its park read, its scope released, it unclaimed, a's heads read; then eight items each read and its project's heads read again. */
const HELD_ROUND_TRIPS = 1 + 5 + 8 * 2;

const options: SubmitOptions = { force: false, maxQueued: 10_000, deadlineAt: null, createdBy: null, traceparent: null };

/**
 * The transaction's own handle, each statement's text recorded before it runs on it; `afterAll`, when
 * given, is awaited after each `all` statement returned (a test holds the transaction there).
 */
class CountingSql implements Sql {
  readonly dialect;
  readonly texts: string[] = [];
  /** Statements sent on their own (not queued for the COMMIT's query): one round trip each. */
  roundTrips = 0;
  readonly atCommit?: Sql['atCommit'];
  constructor(
    private readonly inner: Sql,
    private readonly afterAll?: (text: string) => Promise<void>,
  ) {
    this.dialect = inner.dialect;
    const atCommit = inner.atCommit;
    if (atCommit) {
      this.atCommit = (text, params, committed) => {
        this.texts.push(text);
        atCommit(text, params, committed);
      };
    }
  }
  get connection(): object {
    return this.inner.connection;
  }
  get<T>(text: string, params?: SqlParams): Promise<T | undefined> {
    this.texts.push(text);
    this.roundTrips++;
    return this.inner.get<T>(text, params);
  }
  async all<T>(text: string, params?: SqlParams): Promise<T[]> {
    this.texts.push(text);
    this.roundTrips++;
    const rows = await this.inner.all<T>(text, params);
    await this.afterAll?.(text);
    return rows;
  }
  run(text: string, params?: SqlParams): Promise<RunResult> {
    this.texts.push(text);
    this.roundTrips++;
    return this.inner.run(text, params);
  }
}

/** generate-all of project `p` in one write, its statements counted and its events kept. */
async function generateAll(projectId: string) {
  let sql!: CountingSql;
  const events: EngineEvent[] = [];
  const result = await db.write((tx: Tx) => {
    sql = new CountingSql(tx.sql);
    const emit = (e: EngineEvent) => {
      events.push(e);
      tx.emit(e);
    };
    return submitOperation({ ...tx, sql, emit }, operations, 'story_generate_all', { project_id: projectId }, options);
  });
  const inserts = (table: string) => sql.texts.filter((t) => t.trimStart().startsWith(`INSERT INTO ${table} `)).length;
  return { parent: result.thread.id, statements: sql.texts.length, threadInserts: inserts('llm_threads'), itemInserts: inserts('llm_work_items'), events };
}

const childrenOf = (parent: string) =>
  db.reader.all<{ id: string; status: string; items: number; queued: number }>(
    `SELECT t.id, t.status, count(w.id)::int AS items, count(w.id) FILTER (WHERE w.status = 'queued')::int AS queued
     FROM llm_threads t LEFT JOIN llm_work_items w ON w.thread_id = t.id WHERE t.parent_thread_id = ? GROUP BY t.id ORDER BY t.id`,
    [parent],
  );

/**
 * Project `r` (3 epics) and E2's own run, inserted and held open (`single.go()` commits it): a
 * generate-all's lookup does not see it, its insert waits for it (`pid`'s transaction).
 */
async function epicRunHeldOpen() {
  await db.write((tx) => importProject(tx, project('r', 3)));
  const single = pausedWriteBy(
    db.write,
    async (tx) => {
      const r = await submitOperation(tx, operations, 'story_generate_epic', { project_id: 'r', epic_id: 'E2' }, options);
      return { thread: r.thread.id, pid: await backendPid(tx.sql) };
    },
    async (_tx, a) => a.thread,
  );
  return { single, pid: (await single.reached).pid };
}

describe('generate-all writes its children in a statement per table, not per child', () => {
  it('over 50 epics: one INSERT of the children’s threads and one of their items; each child a thread, a queued item and its events', async () => {
    await db.write((tx) => importProject(tx, project('p', 50)));
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
    const depth = await db.reader.get<{ n: number }>('SELECT coalesce(sum(queued), 0)::int AS n FROM llm_queue_depth');
    expect(depth?.n).toBe(50);
  });

  it('over 1,001 epics: two chunks, at most 1,000 rows a statement', async () => {
    await db.write((tx) => importProject(tx, project('big', 1_001)));
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
    await waitUntil(async () => (await writesWaitingFor(db.reader, pid)) === 1, 'the generate-all to wait for E2’s run');
    single.go();
    const e2 = await single.done;
    const run = await all;
    const children = await childrenOf(run.parent);
    expect(children).toHaveLength(3);
    expect(children.map((c) => c.id)).toContain(e2);
    expect(children.every((c) => c.items === 1)).toBe(true);
    const e2Runs = await db.reader.get<{ n: number }>(
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
    const all = db.write((tx: Tx) => {
      runs++;
      const sql = new CountingSql(tx.sql, runs === 1 ? heldAfterInsert : undefined);
      return submitOperation({ ...tx, sql }, operations, 'story_generate_all', { project_id: 'r' }, options);
    });
    all.catch(() => {});
    await waitUntil(async () => (await writesWaitingFor(db.reader, pid)) === 1, 'the generate-all to wait for E2’s run');
    single.go();
    const e2 = await single.done;
    await inserted;
    // E2's thread ends before the generate-all reads it back: that run fails as a concurrent change (not
    // main's TypeError), and the write runs the closure again, which creates E2's child anew.
    await db.write((tx) => cancelThread(tx, e2));
    open();
    const run = await all;
    expect(runs).toBe(2);
    const children = await childrenOf(run.thread.id);
    expect(children).toHaveLength(3);
    expect(children.map((c) => c.id)).not.toContain(e2);
    expect(children.every((c) => c.items === 1)).toBe(true);
  });
});

/** Projects a, b and c, each with three queued items due at 1, 2 and 3. */
async function threeProjectsOfThree() {
  for (const p of ['a', 'b', 'c']) {
    for (let i = 1; i <= 3; i++) {
      const id = `${p}${i}`;
      await insertThread(db.reader, { ...testThreadRow(id), space_id: p });
      await insertWorkItem(db.reader, testWorkItemRow(id, { project_id: p, not_before: i }));
    }
  }
}

describe('a claim round reads its heads once, each group’s next head coming with its candidate', () => {
  it('one round leases six items of three projects taking turns, with one read of the heads', async () => {
    await threeProjectsOfThree();
    const config = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
    const flow = flowControlOf(config.flow, operations, createModelRouter(config, undefined));
    let sql!: CountingSql;
    const round = await db.write((tx) => {
      sql = new CountingSql(tx.sql);
      return claimWorkItems({ ...tx, sql }, flow, 'd1', 6, 60_000);
    });
    // Each project's group in due order, the projects taking turns (a group's next head from the read of its last).
    expect(round.claimed.map((c) => c.item.id)).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'c2']);
    // The round's one read of every group's heads; no project's heads read again (six more before).
    expect(sql.texts.filter((t) => t.includes('WITH RECURSIVE g(project_id, priority)'))).toHaveLength(1);
    // No budget: each item read, leased and its scope locked in one statement (a read, then a claim, before);
    // its reservation goes in the COMMIT's query. The heads' read and one round trip per item.
    expect(sql.roundTrips).toBe(1 + 6);
    const leased = await db.reader.all<{ id: string }>("SELECT id FROM llm_work_items WHERE status = 'claimed' AND lease_owner = 'd1' ORDER BY id");
    expect(leased.map((r) => r.id)).toEqual(['a1', 'a2', 'b1', 'b2', 'c1', 'c2']);
    expect((await db.reader.all<{ scope: string }>('SELECT scope FROM locks')).length).toBe(6);
  });

  it('a route parked by a 429 holds back items read and claimed together: each left queued, unleased, its scope free', async () => {
    await threeProjectsOfThree();
    // a1's budget park is over: its claim clears the code (the item runs), and the undo must put it back.
    await db.reader.run("UPDATE llm_work_items SET error_code = 'BUDGET_EXCEEDED', error_message = 'over budget' WHERE id = 'a1'");
    const config = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
    const flow = flowControlOf(config.flow, operations, createModelRouter(config, undefined), sharedRateLimits);
    // The items' kind is no operation: their request cannot be built, and their call's route is the default one.
    const route = flow.router.defaultRoute;
    await db.write((tx) => sharedRateLimits.park(tx.sql, route.key, 5_000_000_000_000, tx.now));
    let sql!: CountingSql;
    const round = await db.write((tx) => {
      sql = new CountingSql(tx.sql);
      return claimWorkItems({ ...tx, sql }, flow, 'd1', 6, 60_000);
    });
    expect(round.claimed).toEqual([]);
    expect(round.limitedUntil).toBe(5_000_000_000_000);
    // Only the first held item is claimed and undone; once held, the round reads its candidates first: each
    // of the other eight costs its read and its project's heads, not a claim, its undo and the heads.
    expect(sql.texts.filter((t) => t.startsWith('WITH c AS MATERIALIZED'))).toHaveLength(1);
    expect(sql.texts.filter((t) => t.includes("SET status = 'queued'"))).toHaveLength(1);
    expect(sql.roundTrips).toBe(HELD_ROUND_TRIPS);
    const items = await db.reader.all<{
      id: string;
      status: string;
      lease_owner: string | null;
      started_at: number | null;
      error_code: string | null;
      error_message: string | null;
    }>('SELECT id, status, lease_owner, started_at, error_code, error_message FROM llm_work_items ORDER BY id');
    expect(items).toHaveLength(9);
    expect(items.every((i) => i.status === 'queued' && i.lease_owner === null && i.started_at === null)).toBe(true);
    expect(items.map((i) => [i.error_code, i.error_message])).toEqual([['BUDGET_EXCEEDED', 'over budget'], ...Array.from({ length: 8 }, () => [null, null])]);
    expect(await db.reader.all('SELECT scope FROM locks')).toEqual([]);
    // Once the park is lifted, the next round leases them (in the order its scheduler's turns give).
    await db.write((tx) => sharedRateLimits.unpark(tx.sql, route.key));
    const next = await db.write((tx) => claimWorkItems(tx, flow, 'd1', 6, 60_000));
    expect(next.claimed).toHaveLength(6);
    expect(await db.reader.all('SELECT scope FROM locks')).toHaveLength(6);
  });
});

/** A round of d1 (limit 6), its statements counted. */
async function countedRound(flow: FlowControl) {
  let sql!: CountingSql;
  const round = await db.write((tx) => {
    sql = new CountingSql(tx.sql);
    return claimWorkItems({ ...tx, sql }, flow, 'd1', 6, 60_000);
  });
  return { round, sql };
}

const itemsAsInserted = async () =>
  (
    await db.reader.all<{ status: string; lease_owner: string | null; started_at: number | null }>('SELECT status, lease_owner, started_at FROM llm_work_items')
  ).every((i) => i.status === 'queued' && i.lease_owner === null && i.started_at === null);

describe('a route that holds back an item claimed with its read leaves it as it was', () => {
  const config = () => loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });

  it('an open breaker: nothing leased, no scope row, the round says the breaker held it, and no probe is taken', async () => {
    await threeProjectsOfThree();
    const flow = flowControlOf(config().flow, operations, createModelRouter(config(), undefined));
    const breaker = flow.router.breaker(flow.router.defaultRoute);
    const now = Date.now();
    for (let i = 0; i < 5; i++) breaker.onTransientFailure(now);
    const { round } = await countedRound(flow);
    expect(round.claimed).toEqual([]);
    expect(round.breakerHeld).toBe(true);
    expect(round.limitedUntil).toBe(breaker.reopensAt());
    expect(await itemsAsInserted()).toBe(true);
    expect(await db.reader.all('SELECT scope FROM locks')).toEqual([]);
    // Still open (no half-open probe taken by a held claim) until it reopens.
    expect(breaker.snapshot().state).toBe('open');
  });

  it("this daemon's own limiter (a 429's park of a daemon alone): nothing leased, no scope row, the round looks again at the park's end", async () => {
    await threeProjectsOfThree();
    const flow = flowControlOf(config().flow, operations, createModelRouter(config(), undefined));
    flow.limiter.park(flow.router.defaultRoute.key, 5_000_000_000_000, Date.now());
    const { round } = await countedRound(flow);
    expect(round.claimed).toEqual([]);
    expect(round.limitedUntil).toBe(5_000_000_000_000);
    expect(await itemsAsInserted()).toBe(true);
    expect(await db.reader.all('SELECT scope FROM locks')).toEqual([]);
  });

  it("a scope whose lapsed holder's row is there: a held round keeps that row, so the holder's late finish still releases it", async () => {
    await threeProjectsOfThree();
    // z's lease on a1's scope expired (its daemon stalled); its row is still there.
    await db.reader.run("INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES ('p:a1', 'z', 1, 2)");
    const flow = flowControlOf(config().flow, operations, createModelRouter(config(), undefined), sharedRateLimits);
    const route = flow.router.defaultRoute;
    await db.write((tx) => sharedRateLimits.park(tx.sql, route.key, 5_000_000_000_000, tx.now));
    const { round } = await countedRound(flow);
    expect(round.claimed).toEqual([]);
    expect(await itemsAsInserted()).toBe(true);
    expect(await db.reader.all('SELECT scope, owner, acquired_at, expires_at FROM locks')).toEqual([
      { scope: 'p:a1', owner: 'z', acquired_at: 1, expires_at: 2 },
    ]);
    // Unparked, the round takes the lapsed row over for a1 (its checks before its claim).
    await db.write((tx) => sharedRateLimits.unpark(tx.sql, route.key));
    const { round: next } = await countedRound(flow);
    expect(next.claimed.map((c) => c.item.id)).toContain('a1');
    expect(await db.reader.get('SELECT owner FROM locks WHERE scope = ?', ['p:a1'])).toEqual({ owner: 'a1' });
  });
});

describe('an own project whose item is held back competes as any other for the rest of the round', () => {
  it("a busy budget lock of an own project: the round does not walk all that project's items before the others'", async () => {
    const projects = ['a', 'b', 'c', 'z'];
    const counts: Record<string, number> = { a: 3, b: 3, c: 3, z: 20 };
    for (const p of projects) {
      for (let i = 1; i <= counts[p]!; i++) {
        const id = `${p}${i}`;
        await insertThread(db.reader, { ...testThreadRow(id), space_id: p });
        await insertWorkItem(db.reader, testWorkItemRow(id, { project_id: p, not_before: i }));
      }
    }
    // Another daemon's view for which this one ('d1') owns a and z, both budgeted.
    const other = Array.from({ length: 200 }, (_, i) => `d${i + 2}`).find((d) => {
      const owners = assignProjectOwners(projects, ['d1', d]);
      return projects.filter((p) => owners.get(p) === 'd1').join() === 'a,z';
    })!;
    const owners = new OwnProjects('d1');
    owners.setDaemons(['d1', other]);
    const config = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
    const flow = { ...flowControlOf(config.flow, operations, createModelRouter(config, undefined), null, owners), budgetFor: () => ({ total_tokens: 1e12 }) };
    const write = oneAttemptWrite(db.pool, { ...NO_HOOKS, budgeted: (p) => p === 'a' || p === 'z' });
    // z's budget lock is held by another transaction: the round's try finds it busy (a's, taken first, waits for none).
    const holder = pausedWriteBy(
      write,
      (tx) => lockKeyForTransaction(tx.sql, 'budget:z'),
      async () => {},
    );
    await holder.reached;
    let sql!: CountingSql;
    const round = await write((tx) => {
      sql = new CountingSql(tx.sql);
      return claimWorkItems({ ...tx, sql }, flow, 'd1', 5, 60_000);
    });
    holder.go();
    await holder.done;
    // Its own a first, then the others in turn; z's items are held back.
    expect(round.claimed.map((c) => c.item.id)).toEqual(['a1', 'a2', 'a3', 'b1', 'c1']);
    // Candidates read: the five claimed and z's first, held back; z then competes as b and c do and has no
    // turn before the round is full. Before the hold left z out of the round's own set, the round read every
    // one of z's 20 items (each held back) before b1.
    // (b's and c's, without a budget, read in their claim's statement.)
    const candidateReads = sql.texts.filter((t) => t.startsWith('SELECT c.*, nx.id AS x_next_id') || t.startsWith('WITH c AS MATERIALIZED')).length;
    expect(candidateReads).toBe(6);
  });
});
