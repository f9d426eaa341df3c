/**
 * Races between daemons on one Postgres that crossed two locks (issue 18; the LOCK ORDER of
 * engine/tx.ts): two claim rounds taking two lock scopes in crossing order, the recording of a call's
 * answer while another daemon's recovery scan takes over the item's expired lease, two daemons whose
 * configs disagree about a project's budget moving its spend; and, not a deadlock, a thread's end racing
 * its adoption by an orchestration (generate-all adopting an epic run in progress). Each case pins
 * the interleaving with gates, no timing: one transaction stops holding its first lock, the other runs
 * up to where it waited for it, then the first goes on. Postgres broke such a cycle after
 * `deadlock_timeout` by aborting one transaction, which the writer ran again (a stall of ~1 s); here each
 * writer makes one attempt, so a deadlock is a failed write. Real Postgres, the real engine steps.
 */
import { RoundAdmissions } from '../../src/daemon/engine/claim-admissions.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { StaleStateError } from '../../src/core/errors.js';
import { adoptThreads, getThread, insertThread } from '../../src/db/threads.js';
import { acquireLockUnlessBusy } from '../../src/db/locks.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { flowControlOf } from '../../src/daemon/config/flow.js';
import { createModelRouter } from '../../src/daemon/routing/wiring.js';
import { closeAfterError, lockProjectBudget, reserveCharge } from '../../src/daemon/engine/charges.js';
import { recordResponse } from '../../src/daemon/engine/completer.js';
import type { EngineContext } from '../../src/daemon/engine/leased.js';
import { claimWorkItems, type FlowControl } from '../../src/daemon/engine/producer.js';
import { extendLeases, lockStaleLeases, rescueLeases } from '../../src/daemon/engine/rescuer.js';
import { endThread, type Tx, type Write } from '../../src/daemon/engine/tx.js';
import { appendEntry } from '../../src/daemon/engine/ledger-append.js';
import { neverCrash } from '../../src/core/crash.js';
import { loadOperations } from '../../src/operations/loader.js';
import type { OperationRegistry } from '../../src/operations/registry.js';
import { waitUntil } from '../helpers/harness.js';
import {
  aWriteWaitsForALock,
  backendPid,
  NO_HOOKS,
  oneAttemptWrite,
  openRaceDatabase,
  PAID_ANSWER,
  pausedWriteBy,
  type RaceDatabase,
  settled,
} from '../helpers/pg-race.js';
import type { PgSql } from '../../src/db/pg/sql.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
let reader: PgSql;
let write: Write;
let home: string;
let operations: OperationRegistry;

beforeEach(async () => {
  db = await openRaceDatabase();
  ({ reader, write } = db);
  home = mkdtempSync(join(tmpdir(), 'cmb-crossing-locks-'));
  operations = await loadOperations(home, [], operationSettingsOf(loadConfig(home, {})));
});
afterEach(async () => {
  await db?.drop();
  rmSync(home, { recursive: true, force: true });
});

/** `pausedWriteBy` on this file's writer unless `by` is given. */
const pausedWrite = <A, B>(first: (tx: Tx) => Promise<A>, then: (tx: Tx, a: A) => Promise<B>, by: Write = write) => pausedWriteBy(by, first, then);

/** The engine context of daemon `owner` (no call is made: no route). */
function ctxOf(owner: string): EngineContext {
  return {
    owner,
    routeOf: () => {
      throw new Error('no route needed');
    },
    operations,
    cache: false,
    random: () => 0.5,
    priceOf: () => undefined,
    crashAt: neverCrash,
  };
}

describe('claim rounds of two daemons', () => {
  function flow(): FlowControl {
    const config = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9', OPENAI_API_KEY: 'k', COMBINE_MODEL: 'test-model' });
    return flowControlOf(config.flow, operations, createModelRouter(config, undefined));
  }

  it('taking two lock scopes in crossing order: neither waits for the other, both commit', async () => {
    // Scope A: items a1, a2; scope B: b1, b2. By priority a1, b1, b2, a2: round 1 takes a1 (A) then
    // tries b2 (B); round 2, not seeing round 1's claim, takes b1 (B) then tries a2 (A).
    const items = [
      { id: 'a1', scope: 'A', priority: 0 },
      { id: 'b1', scope: 'B', priority: 1 },
      { id: 'b2', scope: 'B', priority: 2 },
      { id: 'a2', scope: 'A', priority: 3 },
    ];
    for (const i of items) {
      await insertThread(reader, testThreadRow(i.id));
      await insertWorkItem(reader, testWorkItemRow(i.id, { lock_scope: i.scope, priority: i.priority }));
    }
    const [flow1, flow2] = [flow(), flow()];
    const claimOne = (tx: Tx, f: FlowControl, owner: string) =>
      claimWorkItems(tx, f, owner, 1, 60_000, new RoundAdmissions()).then((r) => r.claimed.map((c) => c.item.id));
    const round1 = pausedWrite(
      (tx) => claimOne(tx, flow1, 'd1'),
      async (tx, first) => [...first, ...(await claimOne(tx, flow1, 'd1'))],
    );
    expect(await round1.reached).toEqual(['a1']);
    const round2 = pausedWrite(
      (tx) => claimOne(tx, flow2, 'd2'),
      async (tx, first) => [...first, ...(await claimOne(tx, flow2, 'd2'))],
    );
    expect(await round2.reached).toEqual(['b1']);
    // Round 1 goes on to scope B, which round 2 is inserting: it waited for it (or passes over b2).
    round1.go();
    const round1Done = settled(round1.done);
    await waitUntil(async () => round1Done() || (await aWriteWaitsForALock(reader)), 'round 1 to take its next scope or wait for it');
    round2.go();
    const [one, two] = await Promise.all([round1.done, round2.done]);
    expect([one, two]).toEqual([['a1'], ['b1']]);
    const status = async (id: string) => (await getWorkItem(reader, id))!;
    expect((await status('b2')).status).toBe('queued');
    expect((await status('a2')).status).toBe('queued');
    expect((await status('a1')).lease_owner).toBe('d1');
    expect((await status('b1')).lease_owner).toBe('d2');
  });
});

describe("an item's answer recorded while another daemon takes over its expired lease", () => {
  /** Item `a` running under d1, its lease expired, with its charge reserved and its prompt recorded. */
  async function callInFlight(): Promise<void> {
    const input = JSON.stringify({ project_id: 'p', epic_id: 'e' });
    await insertThread(reader, { ...testThreadRow('a'), kind: 'story_generate_epic', input, status: 'running' });
    await insertWorkItem(reader, testWorkItemRow('a', { status: 'running', lease_owner: 'd1', lease_expires_at: 1, lock_scope: 'A' }));
    await write(async (tx) => {
      const item = (await getWorkItem(tx.sql, 'a'))!;
      await tx.sql.run('INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES (?, ?, ?, ?)', ['A', 'a', 1, 1]);
      await reserveCharge(tx, item, 'test-model', { tokens: 100, cost_usd: 0 });
      const thread = { ...testThreadRow('a'), kind: 'story_generate_epic', input, status: 'running' as const };
      appendEntry(tx, thread, 'a', 'prompt', 1, { request: {}, attempt: 1, repair: 0 });
    });
  }

  it('the take-over holds the item: the record waits for it and finds its lease lost, no deadlock', async () => {
    await callInFlight();
    // d2's recovery scan takes the lease over and closes the charge (in doubt); it commits after the gate,
    // appending the INTERRUPTED entry at its COMMIT.
    const takeover = pausedWrite(
      async (tx) => {
        const stale = await lockStaleLeases(tx, { startup: false, exclusive: false, owner: 'd2', homePrefix: 'home-d2:', inFlight: new Map() });
        return { interrupted: (await rescueLeases(tx, ctxOf('d2'), stale, 60_000)).interrupted, pid: await backendPid(tx.sql) };
      },
      async (_tx, { interrupted }) => interrupted,
    );
    const { interrupted, pid: takeoverPid } = await takeover.reached;
    expect(interrupted).toBe(1);
    // d1's call returns meanwhile: it records the answer (on main: chain head, then the charge d2 holds).
    const record = write((tx) => recordResponse(tx, ctxOf('d1'), 'a', PAID_ANSWER));
    record.catch(() => {});
    const recordDone = settled(record);
    await waitUntil(async () => recordDone() || (await aWriteWaitsForALock(reader, takeoverPid)), 'the record to wait for the take-over (or fail)');
    takeover.go();
    expect(await takeover.done).toBe(1);
    await expect(record).rejects.toBeInstanceOf(StaleStateError);
    const entries = await reader.all<{ entry_type: string }>("SELECT entry_type FROM llm_ledger_entries WHERE work_item_id = 'a' ORDER BY seq");
    expect(entries.map((e) => e.entry_type)).toEqual(['prompt', 'error']);
    const charge = await reader.get<{ status: string }>("SELECT status FROM llm_charges WHERE work_item_id = 'a'");
    expect(charge?.status).toBe('in_doubt');
  });
});

describe("a late heartbeat extending its item's expired scope while a claim round takes it", () => {
  it('the heartbeat extends its items first, then their scopes: no cycle through a step waiting for the budget', async () => {
    // Items i1 (scope S, expired: d1 stalled) and i2 (scope S2, live) of project p, running under d1.
    const input = JSON.stringify({ project_id: 'p', epic_id: 'e' });
    for (const [id, scope, expires] of [
      ['i1', 'S', 1],
      ['i2', 'S2', Date.now() + 60_000],
    ] as const) {
      await insertThread(reader, { ...testThreadRow(id), kind: 'story_generate_epic', input, status: 'running' });
      await insertWorkItem(reader, testWorkItemRow(id, { status: 'running', lease_owner: 'd1', lease_expires_at: 1, lock_scope: scope }));
      await reader.run('INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES (?, ?, ?, ?)', [scope, id, 1, expires]);
    }
    const budgeted = oneAttemptWrite(db.pool, { ...NO_HOOKS, budgeted: () => true });
    // d2's claim round holds p's budget lock, then (after the gate) takes the expired scope S for its item y.
    const round = pausedWrite(
      async (tx) => {
        await lockProjectBudget(tx, 'p');
        return backendPid(tx.sql);
      },
      (tx) => acquireLockUnlessBusy(tx.sql, { scope: 'S', owner: 'y', now: tx.now, expires_at: tx.now + 60_000 }),
      budgeted,
    );
    const roundPid = await round.reached;
    // d1 records i2's answer: it locks i2, then waits for p's budget lock.
    let stepPid = 0;
    const step = budgeted(async (tx) => {
      stepPid = await backendPid(tx.sql);
      return recordResponse(tx, ctxOf('d1'), 'i2', PAID_ANSWER);
    });
    step.catch(() => {});
    const stepDone = settled(step);
    await waitUntil(async () => stepDone() || (await aWriteWaitsForALock(reader, roundPid)), 'the step to wait for the budget lock');
    // d1's heartbeat meanwhile: on the branch before the fix it extended S (i1's), then waited for i2's row.
    const heartbeat = write((tx) =>
      extendLeases(
        tx,
        'd1',
        [
          { id: 'i1', lockScope: 'S' },
          { id: 'i2', lockScope: 'S2' },
        ],
        tx.now + 60_000,
      ),
    );
    heartbeat.catch(() => {});
    const heartbeatDone = settled(heartbeat);
    await waitUntil(async () => heartbeatDone() || (await aWriteWaitsForALock(reader, stepPid)), "the heartbeat to wait for i2's step");
    round.go();
    const results = await Promise.allSettled([round.done, step, heartbeat]);
    expect(results.map((r) => (r.status === 'fulfilled' ? 'ok' : String((r.reason as Error).message)))).toEqual(['ok', 'ok', 'ok']);
    // The round took S; the heartbeat found it taken: i1 is lost to d1.
    expect(await round.done).toBe(true);
    expect(await heartbeat).toEqual(['i1']);
  });

  it('a claim round taking a scope row the heartbeat is extending passes over it, without waiting', async () => {
    await insertThread(reader, { ...testThreadRow('i1'), status: 'running' });
    await insertWorkItem(reader, testWorkItemRow('i1', { status: 'running', lease_owner: 'd1', lease_expires_at: 1, lock_scope: 'S' }));
    await reader.run('INSERT INTO locks (scope, owner, acquired_at, expires_at) VALUES (?, ?, ?, ?)', ['S', 'i1', 1, 1]);
    const heartbeat = pausedWrite(
      (tx) => extendLeases(tx, 'd1', [{ id: 'i1', lockScope: 'S' }], tx.now + 60_000),
      async (_tx, lost) => lost,
    );
    expect(await heartbeat.reached).toEqual([]);
    const round = write((tx) => acquireLockUnlessBusy(tx.sql, { scope: 'S', owner: 'y', now: tx.now, expires_at: tx.now + 60_000 }));
    const roundDone = settled(round);
    await waitUntil(async () => roundDone() || (await aWriteWaitsForALock(reader)), 'the round to take S or wait for it');
    const roundWaited = !roundDone();
    heartbeat.go();
    // Before: the round's insert waited for the heartbeat's row (a wait another lock could close into a cycle).
    expect(roundWaited).toBe(false);
    expect([await round, await heartbeat.done]).toEqual([false, []]);
    expect((await reader.get<{ owner: string }>("SELECT owner FROM locks WHERE scope = 'S'"))?.owner).toBe('i1');
  });
});

describe("a project's spend moved by two daemons whose configs disagree about its budget", () => {
  it('both move it after their ledger append: neither waits for the other, both commit', async () => {
    // Items a and b of project p, each with its call's charge reserved.
    for (const id of ['a', 'b']) {
      await insertThread(reader, { ...testThreadRow(id), status: 'running' });
      await insertWorkItem(reader, testWorkItemRow(id, { status: 'running', lease_owner: 'd', lease_expires_at: Date.now() + 60_000 }));
      await write(async (tx) => reserveCharge(tx, (await getWorkItem(tx.sql, id))!, 'test-model', { tokens: 100, cost_usd: 0.5 }));
    }
    // Each call failed with an HTTP error (not billed: the reservation comes back), then the error entry.
    const failed = { code: 'PROVIDER_ERROR' as const, class: 'transient' as const, message: 'HTTP 500', httpStatus: 500 };
    const fail = async (tx: Tx, id: string) => closeAfterError(tx, (await getWorkItem(tx.sql, id))!, failed, 5);
    const errorEntry = (tx: Tx, id: string) => appendEntry(tx, { ...testThreadRow(id), status: 'running' }, id, 'error', 1, { code: 'HTTP_500' });
    const budgeted = oneAttemptWrite(db.pool, { ...NO_HOOKS, budgeted: () => true });
    // Daemon 1 has a budget for p: it gives a's reservation back (on main: the spend row at once) …
    const one = pausedWrite(
      (tx) => fail(tx, 'a'),
      async (tx) => errorEntry(tx, 'a'),
      budgeted,
    );
    await one.reached;
    // … daemon 2 has none: chain head, then the spend row, in its COMMIT's query.
    const two = write(async (tx) => {
      await fail(tx, 'b');
      errorEntry(tx, 'b');
    });
    const twoDone = settled(two);
    await waitUntil(async () => twoDone() || (await aWriteWaitsForALock(reader)), 'daemon 2 to commit or wait for the spend row');
    one.go();
    await Promise.all([one.done, two]);
    const spend = await reader.get<{ tokens: number }>("SELECT sum(tokens)::int AS tokens FROM llm_project_spend WHERE project_id = 'p'");
    expect(spend?.tokens).toBe(0);
  });
});

describe('a thread ending while an orchestration adopts it', () => {
  it('the end read the thread before the adoption committed: it still closes the orchestration', async () => {
    // Generate-all's orchestration, whose only child is the epic run it is adopting (already running alone).
    await insertThread(reader, { ...testThreadRow('p'), role: 'orchestration', status: 'running' });
    await insertThread(reader, { ...testThreadRow('a'), status: 'running' });
    // The engine's end of the thread reads it (no parent yet), then ends it after the adoption committed.
    const end = pausedWrite(
      async (tx) => (await getThread(tx.sql, 't-a'))!,
      (tx, thread) => endThread(tx, thread, 'complete'),
    );
    expect((await end.reached).parent_thread_id).toBeNull();
    await write((tx) => adoptThreads(tx.sql, ['t-a'], 't-p'));
    end.go();
    await end.done;
    // On main the end's UPDATE matched (the status had not changed), its row said "no parent", and the
    // orchestration stayed running until the recovery scan closed it.
    expect([(await getThread(reader, 't-a'))?.status, (await getThread(reader, 't-p'))?.status]).toEqual(['complete', 'complete']);
  });
});
