/**
 * Round trips per item of a claim round on Postgres (issue 18 target 9), counted through a wrapper of the
 * real transaction's handle (every statement still runs on the real connection), what they wrote read back:
 * - each claim's candidate read brings its group's next head, so the round reads the heads once, not its
 *   project's again after every claim (one round trip per claimed item before); an item of a project
 *   without a budget is read and claimed in one statement (two round trips per item before), and one its
 *   route then holds back (a 429's park shared by the daemons) is left as it was: queued, no lease, its
 *   scope free;
 * - sharing the database, an own project whose item is held back (here its budget lock busy) competes as
 *   any other for the rest of the round: the round reads one of its items, not all of them first.
 * Real Postgres, the real claim round.
 */
import { RoundAdmissions } from '../../src/daemon/engine/claim-admissions.js';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/daemon/config/config.js';
import { flowControlOf } from '../../src/daemon/config/flow.js';
import { claimWorkItems, type FlowControl } from '../../src/daemon/engine/producer.js';
import { sharedRateLimits } from '../../src/daemon/engine/shared-rate-limits.js';
import { createModelRouter } from '../../src/daemon/routing/wiring.js';
import { lockKeyForTransaction } from '../../src/db/key-locks.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { assignProjectOwners, OwnProjects } from '../../src/domain/project-owners.js';
import { CountingSql, useSubmitDatabase } from '../helpers/pg-counting-sql.js';
import { NO_HOOKS, oneAttemptWrite, pausedWriteBy } from '../helpers/pg-race.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

const env = useSubmitDatabase();

/** The 429-parked round's round trips (see its test): the heads' read; a1 claimed, its park read, its scope released, it unclaimed, a's heads read; then eight items each read and its project's heads read again. */
const HELD_ROUND_TRIPS = 1 + 5 + 8 * 2;

/** Projects a, b and c, each with three queued items due at 1, 2 and 3. */
async function threeProjectsOfThree() {
  for (const p of ['a', 'b', 'c']) {
    for (let i = 1; i <= 3; i++) {
      const id = `${p}${i}`;
      await insertThread(env.db.reader, { ...testThreadRow(id), space_id: p });
      await insertWorkItem(env.db.reader, testWorkItemRow(id, { project_id: p, not_before: i }));
    }
  }
}

describe('a claim round reads its heads once, each group’s next head coming with its candidate', () => {
  it('one round leases six items of three projects taking turns, with one read of the heads', async () => {
    await threeProjectsOfThree();
    const config = loadConfig(env.home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
    const flow = flowControlOf(config.flow, env.operations, createModelRouter(config, undefined));
    let sql!: CountingSql;
    const round = await env.db.write((tx) => {
      sql = new CountingSql(tx.sql);
      return claimWorkItems({ ...tx, sql }, flow, 'd1', 6, 60_000, new RoundAdmissions());
    });
    // Each project's group in due order, the projects taking turns (a group's next head from the read of its last).
    expect(round.claimed.map((c) => c.item.id)).toEqual(['a1', 'b1', 'c1', 'a2', 'b2', 'c2']);
    // The round's one read of every group's heads; no project's heads read again (six more before).
    expect(sql.texts.filter((t) => t.includes('WITH RECURSIVE g(project_id, priority)'))).toHaveLength(1);
    // No budget: each item read, leased and its scope locked in one statement (a read, then a claim, before);
    // its reservation goes in the COMMIT's query. The heads' read and one round trip per item.
    expect(sql.roundTrips).toBe(1 + 6);
    const leased = await env.db.reader.all<{ id: string }>("SELECT id FROM llm_work_items WHERE status = 'claimed' AND lease_owner = 'd1' ORDER BY id");
    expect(leased.map((r) => r.id)).toEqual(['a1', 'a2', 'b1', 'b2', 'c1', 'c2']);
    expect((await env.db.reader.all<{ scope: string }>('SELECT scope FROM locks')).length).toBe(6);
  });

  it('a route parked by a 429 holds back items read and claimed together: each left queued, unleased, its scope free', async () => {
    await threeProjectsOfThree();
    // a1's budget park is over: its claim clears the code (the item runs), and the undo must put it back.
    await env.db.reader.run("UPDATE llm_work_items SET error_code = 'BUDGET_EXCEEDED', error_message = 'over budget' WHERE id = 'a1'");
    const config = loadConfig(env.home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
    const flow = flowControlOf(config.flow, env.operations, createModelRouter(config, undefined), sharedRateLimits);
    // The items' kind is no operation: their request cannot be built, and their call's route is the default one.
    const route = flow.router.defaultRoute;
    await env.db.write((tx) => sharedRateLimits.park(tx.sql, route.key, 5_000_000_000_000, tx.now));
    let sql!: CountingSql;
    const round = await env.db.write((tx) => {
      sql = new CountingSql(tx.sql);
      return claimWorkItems({ ...tx, sql }, flow, 'd1', 6, 60_000, new RoundAdmissions());
    });
    expect(round.claimed).toEqual([]);
    expect(round.limitedUntil).toBe(5_000_000_000_000);
    // Only the first held item is claimed and undone; once held, the round reads its candidates first: each
    // of the other eight costs its read and its project's heads, not a claim, its undo and the heads.
    expect(sql.texts.filter((t) => t.startsWith('WITH c AS MATERIALIZED'))).toHaveLength(1);
    expect(sql.texts.filter((t) => t.includes("SET status = 'queued'"))).toHaveLength(1);
    expect(sql.roundTrips).toBe(HELD_ROUND_TRIPS);
    const items = await env.db.reader.all<{
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
    expect(await env.db.reader.all('SELECT scope FROM locks')).toEqual([]);
    // Once the park is lifted, the next round leases them (in the order its scheduler's turns give).
    await env.db.write((tx) => sharedRateLimits.unpark(tx.sql, route.key));
    const next = await env.db.write((tx) => claimWorkItems(tx, flow, 'd1', 6, 60_000, new RoundAdmissions()));
    expect(next.claimed).toHaveLength(6);
    expect(await env.db.reader.all('SELECT scope FROM locks')).toHaveLength(6);
  });
});

/** A round of d1 (limit 6), its statements counted. */
async function countedRound(flow: FlowControl) {
  let sql!: CountingSql;
  const round = await env.db.write((tx) => {
    sql = new CountingSql(tx.sql);
    return claimWorkItems({ ...tx, sql }, flow, 'd1', 6, 60_000, new RoundAdmissions());
  });
  return { round, sql };
}

const itemsAsInserted = async () =>
  (
    await env.db.reader.all<{ status: string; lease_owner: string | null; started_at: number | null }>(
      'SELECT status, lease_owner, started_at FROM llm_work_items',
    )
  ).every((i) => i.status === 'queued' && i.lease_owner === null && i.started_at === null);

describe('a route that holds back an item claimed with its read leaves it as it was', () => {
  const config = () => loadConfig(env.home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });

  it('an open breaker: nothing leased, no scope row, the round says the breaker held it, and no probe is taken', async () => {
    await threeProjectsOfThree();
    const flow = flowControlOf(config().flow, env.operations, createModelRouter(config(), undefined));
    const breaker = flow.router.breaker(flow.router.defaultRoute);
    const now = Date.now();
    for (let i = 0; i < 5; i++) breaker.onTransientFailure(now);
    const { round } = await countedRound(flow);
    expect(round.claimed).toEqual([]);
    expect(round.breakerHeld).toBe(true);
    expect(round.limitedUntil).toBe(breaker.reopensAt());
    expect(await itemsAsInserted()).toBe(true);
    expect(await env.db.reader.all('SELECT scope FROM locks')).toEqual([]);
    // Still open (no half-open probe taken by a held claim) until it reopens.
    expect(breaker.snapshot().state).toBe('open');
  });

  it("this daemon's own limiter (a 429's park of a daemon alone): nothing leased, no scope row, the round looks again at the park's end", async () => {
    await threeProjectsOfThree();
    const flow = flowControlOf(config().flow, env.operations, createModelRouter(config(), undefined));
    flow.limiter.park(flow.router.defaultRoute.key, 5_000_000_000_000, Date.now());
    const { round } = await countedRound(flow);
    expect(round.claimed).toEqual([]);
    expect(round.limitedUntil).toBe(5_000_000_000_000);
    expect(await itemsAsInserted()).toBe(true);
    expect(await env.db.reader.all('SELECT scope FROM locks')).toEqual([]);
  });

  it("a scope whose lapsed holder's row is there: a held round keeps that row, so the holder's late finish still releases it", async () => {
    await threeProjectsOfThree();
    // z's lease on a1's scope expired (its daemon stalled); its row is still there.
    await env.db.reader.run("INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES ('p:a1', 'z', 1, 2)");
    const flow = flowControlOf(config().flow, env.operations, createModelRouter(config(), undefined), sharedRateLimits);
    const route = flow.router.defaultRoute;
    await env.db.write((tx) => sharedRateLimits.park(tx.sql, route.key, 5_000_000_000_000, tx.now));
    const { round } = await countedRound(flow);
    expect(round.claimed).toEqual([]);
    expect(await itemsAsInserted()).toBe(true);
    expect(await env.db.reader.all('SELECT scope, owner, acquired_at, expires_at FROM locks')).toEqual([
      { scope: 'p:a1', owner: 'z', acquired_at: 1, expires_at: 2 },
    ]);
    // Unparked, the round takes the lapsed row over for a1 (its checks before its claim).
    await env.db.write((tx) => sharedRateLimits.unpark(tx.sql, route.key));
    const { round: next } = await countedRound(flow);
    expect(next.claimed.map((c) => c.item.id)).toContain('a1');
    expect(await env.db.reader.get('SELECT owner FROM locks WHERE scope = ?', ['p:a1'])).toEqual({ owner: 'a1' });
  });
});

describe('an own project whose item is held back competes as any other for the rest of the round', () => {
  it("a busy budget lock of an own project: the round does not walk all that project's items before the others'", async () => {
    const projects = ['a', 'b', 'c', 'z'];
    const counts: Record<string, number> = { a: 3, b: 3, c: 3, z: 20 };
    for (const p of projects) {
      for (let i = 1; i <= counts[p]!; i++) {
        const id = `${p}${i}`;
        await insertThread(env.db.reader, { ...testThreadRow(id), space_id: p });
        await insertWorkItem(env.db.reader, testWorkItemRow(id, { project_id: p, not_before: i }));
      }
    }
    // Another daemon's view for which this one ('d1') owns a and z, both budgeted.
    const other = Array.from({ length: 200 }, (_, i) => `d${i + 2}`).find((d) => {
      const owners = assignProjectOwners(projects, ['d1', d]);
      return projects.filter((p) => owners.get(p) === 'd1').join() === 'a,z';
    })!;
    const owners = new OwnProjects('d1');
    owners.setDaemons(['d1', other]);
    const config = loadConfig(env.home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
    const flow = {
      ...flowControlOf(config.flow, env.operations, createModelRouter(config, undefined), null, owners),
      budgetFor: () => ({ total_tokens: 1e12 }),
    };
    const write = oneAttemptWrite(env.db.pool, { ...NO_HOOKS, budgeted: (p) => p === 'a' || p === 'z' });
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
      return claimWorkItems({ ...tx, sql }, flow, 'd1', 5, 60_000, new RoundAdmissions());
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
