/**
 * A shared start closure's threads against the writes that take two of them, on one Postgres (issue 18):
 * the closure (engine/shared-writes.ts) starts several items in one transaction, so every thread and
 * orchestration it moves stays locked until it commits. Three interleavings deadlocked while the closure
 * took each item's threads in turn (engine/tx.ts LOCK ORDER, item 4):
 * - a first start of a generate-all's child also starts its open orchestration, so the closure held the
 *   orchestration before a later child's thread, while a user's cancel of that later child by its own id
 *   held the child and then locked the orchestration to close it;
 * - the same with a start that fails its item (its request cannot be built) and closes the orchestration;
 * - generate-all adopting two epic runs in progress, one by one in its epics' order, while a closure
 *   starting their items took them in id order.
 * Each case pins the interleaving with gates on `pg_stat_activity`, no timing; each writer makes one
 * attempt, and every failed write is counted (a failed shared closure's steps run again alone and would
 * hide it): before the fix each case counted a `deadlock detected`. Real Postgres, the real shared
 * closures (`itemWrites`), the real cancel and the real generate-all submit.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { insertProject } from '../../src/db/projects.js';
import { getThread, insertThread, lockThread } from '../../src/db/threads.js';
import { acquireLock } from '../../src/db/locks.js';
import { getWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { itemWrites } from '../../src/daemon/engine/item-pipeline.js';
import type { EngineContext } from '../../src/daemon/engine/leased.js';
import type { BuiltRequest } from '../../src/daemon/engine/request.js';
import type { Tx, Write } from '../../src/daemon/engine/tx.js';
import { cancelThread, importProject } from '../../src/daemon/services/commands.js';
import { submitOperation, type SubmitOptions } from '../../src/daemon/services/submit.js';
import { loadOperations } from '../../src/operations/loader.js';
import type { OperationRegistry } from '../../src/operations/registry.js';
import { project, waitUntil } from '../helpers/harness.js';
import { backendPid, NO_HOOKS, oneAttemptWrite, openRaceDatabase, type RaceDatabase, writesWaitingFor, testEngineContext } from '../helpers/pg-race.js';
import type { PgSql } from '../../src/db/pg/sql.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
/** Every write's failure, also a shared closure's that SharedWrites then hides by running each step alone. */
let failed: string[] = [];
let home: string;
/** The built-in operations (none runs the test rows' kind `k`: such an item's request cannot be built). */
let operations: OperationRegistry;
beforeEach(async () => {
  db = await openRaceDatabase();
  failed = [];
  home = mkdtempSync(join(tmpdir(), 'cmb-start-lock-order-'));
  operations = await loadOperations(home, [], operationSettingsOf(loadConfig(home, {})));
});
afterEach(async () => {
  rmSync(home, { recursive: true, force: true });
  await db?.drop();
});
const reader = (): PgSql => db.reader;
const counted =
  (writer: Write): Write =>
  (fn) =>
    writer(fn).catch((err: unknown) => {
      failed.push(String((err as { cause?: unknown }).cause ?? err));
      throw err;
    });
const write: Write = (fn) => counted(db.write)(fn);
const deadlocks = () => failed.filter((f) => /deadlock/i.test(f));

/** Daemon d1's engine context: every call goes to one route. */
const ctx = (): EngineContext => testEngineContext('d1', operations);

const claimed: BuiltRequest = {
  ok: true,
  request: { model: 'test-model', messages: [{ role: 'user', content: 'x' }], temperature: 0, max_tokens: 10 },
  model: 'test-model',
  escalated: false,
};

/** Claimed items `ids` of open threads `t-<id>` under orchestration `t-o`, each holding its scope's lock (as a claim leaves it). */
async function claimedChildren(ids: readonly string[]): Promise<void> {
  for (const id of ids) {
    await insertThread(reader(), { ...testThreadRow(id), parent_thread_id: 't-o' });
    await insertWorkItem(reader(), testWorkItemRow(id, { status: 'claimed', lease_owner: 'd1', lease_expires_at: Date.now() + 60_000 }));
    await acquireLock(reader(), { scope: `p:${id}`, owner: id, now: 1, expires_at: Date.now() + 60_000 });
  }
}

/**
 * The pinned race of a cancel by a child's own id: the cancel locks `t-c` and stops in its `threadsEnded`
 * hook (between the child's end and the orchestration's close, cancelThreads); the closure of `asks` is
 * then run, and once it waits for the cancel, the cancel goes on to close `t-o`.
 */
async function cancelOfCDuringStarts(asks: readonly { itemId: string; claimed: BuiltRequest | null }[]): Promise<void> {
  let go!: () => void;
  const gate = new Promise<void>((r) => (go = r));
  let paused!: (pid: number) => void;
  const reached = new Promise<number>((r) => (paused = r));
  const cancelWriter = oneAttemptWrite(db.pool, {
    ...NO_HOOKS,
    threadsEnded: async (tx: Tx) => {
      paused(await backendPid(tx.sql));
      await gate;
    },
  });
  const cancel = counted(cancelWriter)((tx) => cancelThread(tx, 't-c'));
  cancel.catch(() => {});
  const cancelPid = await reached;
  const starts = itemWrites(write, ctx(), 'postgres');
  const closure = Promise.all(asks.map((a) => starts.start(a)));
  closure.catch(() => {});
  await waitUntil(async () => (await writesWaitingFor(reader(), cancelPid)) === 1, "the start closure to wait for the cancel's child");
  go();
  await Promise.allSettled([cancel, closure]);
}

/**
 * Orchestration `t-o` in `status` with claimed children b and c: the closure of b's start (b's request
 * as the claim built it, or none) and c's, raced with the cancel of c (`cancelOfCDuringStarts`). No deadlock.
 */
async function startsAgainstCancelOfC(status: 'open' | 'running', bClaimed: BuiltRequest | null): Promise<void> {
  await insertProject(reader(), { id: 'p', name: 'p', created_at: 1 });
  await insertThread(reader(), { ...testThreadRow('o'), role: 'orchestration', status });
  await claimedChildren(['b', 'c']);
  await cancelOfCDuringStarts([
    { itemId: 'b', claimed: bClaimed },
    { itemId: 'c', claimed },
  ]);
  expect(deadlocks()).toEqual([]);
}

/** The item's status and its thread's (`t-<id>`). */
const statusOf = async (id: string) => [(await getWorkItem(reader(), id))?.status, (await getThread(reader(), `t-${id}`))?.status];

describe("a shared start closure and a cancel of a later child by the child's own id", () => {
  it.each([
    {
      // b's start is the orchestration's first: it starts t-o with t-b. The closure then needs t-c.
      what: 'opening its orchestration',
      orchestration: 'open' as const,
      bClaimed: claimed,
      b: ['running', 'running'],
      o: 'running',
    },
    {
      // b's request cannot be built (no operation runs its kind `k`): b is dead-lettered, t-b fails, and
      // the closure checks whether t-o is done (it locks t-o). c's start then needs t-c. Every child ends, none complete.
      what: 'failing an item and closing its orchestration',
      orchestration: 'running' as const,
      bClaimed: null,
      b: ['dead_letter', 'failed'],
      o: 'failed',
    },
  ])("$what: the closure takes its children's threads before the orchestration, no deadlock, the cancel wins c", async (c) => {
    await startsAgainstCancelOfC(c.orchestration, c.bClaimed);
    expect(await statusOf('b')).toEqual(c.b);
    expect(await statusOf('c')).toEqual(['failed', 'canceled']);
    expect((await getThread(reader(), 't-o'))?.status).toBe(c.o);
  });
});

describe('generate-all adopting two epic runs while a shared start closure starts their items', () => {
  const options: SubmitOptions = { force: false, maxQueued: 1_000, deadlineAt: null, createdBy: null, traceparent: null };

  it('both take the threads in id order: no deadlock, and the orchestration adopts both runs', async () => {
    await write((tx) => importProject(tx, project('p', 2)));
    // E2's run first: its thread's id is the lower, while generate-all adopts in its epics' order, E1 first.
    const runOf = async (epic: string) =>
      (await write((tx) => submitOperation(tx, operations, 'story_generate_epic', { project_id: 'p', epic_id: epic }, options))).thread.id;
    const e2 = await runOf('E2');
    const e1 = await runOf('E1');
    // Both runs' items claimed by d1 (what a claim round leaves: leased, holding their scope's lock).
    const items = await reader().all<{ id: string; lock_scope: string }>('SELECT id, lock_scope FROM llm_work_items WHERE thread_id IN (?, ?)', [e1, e2]);
    for (const item of items) {
      await reader().run("UPDATE llm_work_items SET status = 'claimed', lease_owner = 'd1', lease_expires_at = ? WHERE id = ?", [Date.now() + 60_000, item.id]);
      await acquireLock(reader(), { scope: item.lock_scope, owner: item.id, now: 1, expires_at: Date.now() + 60_000 });
    }
    // A third transaction holds E2's thread: the closure queues for it first (it starts E2's run first,
    // by thread id), then the submit, which adopted E1's run and then waits for E2's.
    let go!: () => void;
    const gate = new Promise<void>((r) => (go = r));
    let held!: (pid: number) => void;
    const holderPid = new Promise<number>((r) => (held = r));
    const holder = write(async (tx) => {
      await lockThread(tx.sql, e2);
      held(await backendPid(tx.sql));
      await gate;
    });
    const pid = await holderPid;
    const starts = itemWrites(write, ctx(), 'postgres');
    const closure = Promise.all(items.map((i) => starts.start({ itemId: i.id, claimed })));
    closure.catch(() => {});
    await waitUntil(async () => (await writesWaitingFor(reader(), pid)) === 1, 'the start closure to wait for the holder');
    const all = write((tx) => submitOperation(tx, operations, 'story_generate_all', { project_id: 'p' }, options));
    all.catch(() => {});
    await waitUntil(async () => (await writesWaitingFor(reader())) === 2, 'the submit to wait too');
    go();
    await holder;
    await Promise.allSettled([closure, all]);
    expect(deadlocks()).toEqual([]);
    expect(failed).toEqual([]);
    const parent = (await all).thread.id;
    expect([(await getThread(reader(), e1))?.parent_thread_id, (await getThread(reader(), e2))?.parent_thread_id]).toEqual([parent, parent]);
    expect([(await getThread(reader(), e1))?.status, (await getThread(reader(), e2))?.status]).toEqual(['running', 'running']);
  });
});
