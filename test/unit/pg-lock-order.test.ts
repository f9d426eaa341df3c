/**
 * The lock order of a child thread and its orchestration on Postgres (issue 18; engine/tx.ts, LOCK
 * ORDER): every write that changes both locks the child's row before the parent's. Each case pins, with
 * a gate, the interleaving a race between daemons produces — a write holding a child's row (the engine
 * ending or starting it, a retry reopening it) when a cancel of the orchestration arrives — and then
 * lets that write go on. Locking the orchestration first (the cancel on main; the give-up of held calls,
 * one child at a time, once the retry reopened the child first) made the two wait for each other, and
 * Postgres broke the deadlock after `deadlock_timeout` by aborting one of them. The writer runs such a
 * write again, so a daemon only stalled; here each writer makes one attempt, so a deadlock is a failed
 * write. Real Postgres, the real commands and engine steps on rows inserted directly.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ThreadRow } from '../../src/db/schema.js';
import { getThread, insertThread, lockThread } from '../../src/db/threads.js';
import { getLatestWorkItem, insertWorkItem } from '../../src/db/work-items.js';
import { claimWorkItem } from '../../src/db/work-item-claims.js';
import { endThread, type Tx, type Write } from '../../src/daemon/engine/tx.js';
import { startThreads } from '../../src/daemon/engine/starts.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { cancelThread, retryThread } from '../../src/daemon/services/commands.js';
import { loadOperations } from '../../src/operations/loader.js';
import { waitUntil } from '../helpers/harness.js';
import { aWriteWaitsForALock, openRaceDatabase, type RaceDatabase } from '../helpers/pg-race.js';
import type { PgSql } from '../../src/db/pg/sql.js';
import { testThreadRow, testWorkItemRow } from '../helpers/rows.js';

let db: RaceDatabase;
let reader: PgSql;
let write: Write;

beforeEach(async () => {
  db = await openRaceDatabase();
  ({ reader, write } = db);
});
afterEach(() => db?.drop());

/** Orchestration `t-p` with children `t-<child>` (each with one work item `<child>`), in these statuses. */
async function orchestration(parentStatus: 'open' | 'running', children: { id: string; thread: 'open' | 'running'; item: 'queued' | 'running' }[]) {
  await insertThread(reader, { ...testThreadRow('p'), role: 'orchestration', status: parentStatus });
  for (const c of children) {
    await insertThread(reader, { ...testThreadRow(c.id), parent_thread_id: 't-p', status: c.thread });
    const lease = c.item === 'running' ? { lease_owner: 'other-daemon', lease_expires_at: Date.now() + 60_000 } : {};
    await insertWorkItem(reader, testWorkItemRow(c.id, { status: c.item, ...lease }));
  }
}

/**
 * The race, pinned: a write locks thread `holding` (the state of a write that has just changed its
 * child's row and is about to lock the parent); the orchestration `t-p` is canceled meanwhile; once the
 * cancel waits for a row lock, the first write runs `rest`. Both must commit.
 */
async function cancelWhileHolding(holding: string, rest: (tx: Tx, held: ThreadRow) => Promise<unknown>): Promise<void> {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let heldNow!: () => void;
  const held = new Promise<void>((r) => (heldNow = r));
  const holder = write(async (tx) => {
    const row = (await lockThread(tx.sql, holding))!;
    heldNow();
    await gate;
    await rest(tx, row);
  });
  await held;
  const cancel = write((tx) => cancelThread(tx, 't-p'));
  await waitUntil(() => aWriteWaitsForALock(reader), `the cancel to wait for the write holding ${holding}`);
  open();
  await bothCommit(holder, cancel);
}

/** Waits for both writes; throws the first one's error (a deadlock: `InfraError: deadlock detected`). */
async function bothCommit(a: Promise<unknown>, b: Promise<unknown>): Promise<void> {
  for (const r of await Promise.allSettled([a, b])) if (r.status === 'rejected') throw r.reason;
}

const statusOf = async (id: string) => (await getThread(reader, id))!.status;

describe('an orchestration whose last two children end at once', () => {
  it('is closed by the second end: waiting for the parent, it counts the first child ended', async () => {
    await orchestration('running', [
      { id: 'a', thread: 'running', item: 'running' },
      { id: 'b', thread: 'running', item: 'running' },
    ]);
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    let heldNow!: () => void;
    const held = new Promise<void>((r) => (heldNow = r));
    // The first end locks the parent (db/thread-close.ts lockThreadForClose), sees b still running, and waits uncommitted.
    const first = write(async (tx) => {
      await endThread(tx, (await getThread(tx.sql, 't-a'))!, 'complete');
      heldNow();
      await gate;
    });
    await held;
    const second = write(async (tx) => endThread(tx, (await getThread(tx.sql, 't-b'))!, 'complete'));
    await waitUntil(() => aWriteWaitsForALock(reader), 'the second end to wait for the parent');
    open();
    await bothCommit(first, second);
    // The second's look at the children came after the lock it waited for: it saw a's end and closed the parent.
    expect([await statusOf('t-a'), await statusOf('t-b'), await statusOf('t-p')]).toEqual(['complete', 'complete', 'complete']);
  });
});

describe('a child and its orchestration are locked child first, by every write', () => {
  it('a child ending while its orchestration is canceled: both commit, the child keeps its end', async () => {
    await orchestration('running', [
      { id: 'a', thread: 'running', item: 'running' },
      { id: 'b', thread: 'running', item: 'queued' },
    ]);
    await cancelWhileHolding('t-a', (tx, child) => endThread(tx, child, 'complete'));
    expect([await statusOf('t-a'), await statusOf('t-b'), await statusOf('t-p')]).toEqual(['complete', 'canceled', 'canceled']);
  });

  it('a child starting (its item claimed) while its still open orchestration is canceled: both commit', async () => {
    await orchestration('open', [
      { id: 'a', thread: 'open', item: 'queued' },
      { id: 'b', thread: 'open', item: 'queued' },
    ]);
    // The claim leases the item, then the start moves the child and its open parent to running.
    await write(async (tx) => {
      expect(await claimWorkItem(tx.sql, { id: 'a', owner: 'd1', now: tx.now, lease_until: tx.now + 60_000 })).toBeDefined();
    });
    await cancelWhileHolding('t-a', (tx, child) => startThreads(tx, [child], []));
    // The cancel saw the orchestration open and found it running: its guarded UPDATE lost, and it ran again.
    expect([await statusOf('t-a'), await statusOf('t-b'), await statusOf('t-p')]).toEqual(['canceled', 'canceled', 'canceled']);
  });

  it('a held child retried while the orchestration gives up its held calls: both commit', async () => {
    // A failed generate-all whose two children failed with their calls held in doubt (interrupted: hold).
    const home = mkdtempSync(join(tmpdir(), 'cmb-lock-order-'));
    const ops = await loadOperations(home, [], operationSettingsOf(loadConfig(home, {})));
    rmSync(home, { recursive: true, force: true });
    const all = { kind: 'story_generate_all', input: JSON.stringify({ project_id: 'p' }), target_ref: JSON.stringify({ project_id: 'p' }) };
    await insertThread(reader, { ...testThreadRow('p'), ...all, role: 'orchestration', status: 'failed' });
    for (const epic of ['a', 'b']) {
      const input = JSON.stringify({ project_id: 'p', epic_id: epic });
      await insertThread(reader, {
        ...testThreadRow(epic),
        kind: 'story_generate_epic',
        input,
        target_ref: all.target_ref,
        parent_thread_id: 't-p',
        status: 'failed',
      });
      await insertWorkItem(reader, testWorkItemRow(epic, { status: 'failed', error_code: 'INTERRUPTED' }));
    }
    // The retry reopens its child first, then the orchestration (the order every write keeps).
    await cancelWhileHolding('t-b', (tx) => retryThread(tx, ops, 't-b', 1_000));
    // The give-up found the child reopened and ran again: an orchestration running again is canceled with its children.
    expect([await statusOf('t-b'), await statusOf('t-p')]).toEqual(['canceled', 'canceled']);
    expect((await getLatestWorkItem(reader, 't-b'))?.status).toBe('failed');
  });
});
