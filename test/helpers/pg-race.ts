/**
 * What the pinned race tests on Postgres share (pg-lock-order, pg-crossing-locks, pg-replay-race): a
 * fresh migrated database per case (the ledger's rows are append-only: they cannot be truncated between
 * cases), a writer that makes one attempt — a transaction Postgres aborts to break a deadlock fails the
 * write instead of running again, so a deadlock is a failed test — and the check that some transaction
 * waits for a lock (the state a pinned interleaving waits for, never a timeout).
 */
import type pg from 'pg';
import { systemClock } from '../../src/core/clock.js';
import type { Sql } from '../../src/core/sql.js';
import { writeTx } from '../../src/core/tx.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { PgWriter } from '../../src/db/pg/writer.js';
import type { EngineEvent } from '../../src/daemon/engine/events.js';
import type { EngineHooks, Tx, Write } from '../../src/daemon/engine/tx.js';
import type { EngineContext } from '../../src/daemon/engine/leased.js';
import type { ModelRoute } from '../../src/daemon/routing/router.js';
import type { OperationRegistry } from '../../src/operations/registry.js';
import { neverCrash } from '../../src/core/crash.js';
import { waitUntil } from './harness.js';
import { createTestDatabase, openTestPool, type TestDatabase } from './postgres.js';
import type { LedgerRow } from '../../src/db/schema.js';
import { acquireLock } from '../../src/db/locks.js';
import { insertThread } from '../../src/db/threads.js';
import { insertWorkItem } from '../../src/db/work-items.js';
import { recordResponse } from '../../src/daemon/engine/completer.js';
import { simulatedStories } from '../../src/operations/builtin/story_generate_epic/simulate.js';
import { testThreadRow, testWorkItemRow } from './rows.js';

/** No scheduled runs to finalize, no budgets. */
/** Daemon `owner`'s engine context for the race tests: every call goes to one route; nothing is priced. */
export function testEngineContext(owner: string, operations: OperationRegistry, cache = false): EngineContext {
  return {
    owner,
    routeOf: (logical) => ({ logical, model: 'test-model', endpoint: { label: 'test' } }) as unknown as ModelRoute,
    operations,
    cache,
    random: () => 0.5,
    priceOf: () => undefined,
    crashAt: neverCrash,
  };
}

export const NO_HOOKS: EngineHooks = { threadsEnded: async () => {}, budgeted: () => false };

export interface RaceDatabase {
  database: TestDatabase;
  pool: pg.Pool;
  reader: PgSql;
  /** Writes with `NO_HOOKS`, one attempt each. */
  write: Write;
  drop(): Promise<void>;
}

export async function openRaceDatabase(): Promise<RaceDatabase> {
  const database = await createTestDatabase({ migrated: true });
  const pool = openTestPool(database.url, 4);
  return {
    database,
    pool,
    reader: new PgSql(pool),
    write: oneAttemptWrite(pool, NO_HOOKS),
    drop: async () => {
      await pool.end();
      await database.drop();
    },
  };
}

/** A writer on `pool` that runs each closure once: a deadlock (40P01) fails the write. */
export function oneAttemptWrite(pool: pg.Pool, hooks: EngineHooks): Write {
  return writeTx(new PgWriter<EngineEvent>(pool, { conflictAttempts: 1 }), systemClock, hooks);
}

/** The server process running `sql`'s transaction (pass a transaction's `tx.sql`). */
export async function backendPid(sql: Sql): Promise<number> {
  return (await sql.get<{ pid: number }>('SELECT pg_backend_pid() AS pid'))!.pid;
}

/**
 * Some transaction of this database is waiting for a lock; with `heldBy`, for one that backend holds
 * (`pg_blocking_pids`), so that a wait for something else (another test's write, autovacuum) does not pass.
 */
export async function aWriteWaitsForALock(sql: Sql, heldBy?: number): Promise<boolean> {
  return (await writesWaitingFor(sql, heldBy)) > 0;
}

/** A write by `by` that runs `first`, then waits for the returned `go` before it runs `then` and commits. */
export function pausedWriteBy<A, B>(by: Write, first: (tx: Tx) => Promise<A>, then: (tx: Tx, a: A) => Promise<B>) {
  let go!: () => void;
  const gate = new Promise<void>((r) => (go = r));
  let paused!: (a: A) => void;
  const reached = new Promise<A>((r) => (paused = r));
  const done = by(async (tx) => {
    const a = await first(tx);
    paused(a);
    await gate;
    return then(tx, a);
  });
  done.catch(() => {}); // awaited by the test
  return { reached, go, done };
}

/** Whether `p` has settled yet (fulfilled or not). */
export function settled(p: Promise<unknown>): () => boolean {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  return () => done;
}

/** How many transactions of this database wait for a lock (held by backend `heldBy`, when given). */
export async function writesWaitingFor(sql: Sql, heldBy?: number): Promise<number> {
  const row = await sql.get<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
     WHERE datname = current_database() AND wait_event_type = 'Lock' AND (CAST(@heldBy AS int) IS NULL OR pg_blocking_pids(pid) @> ARRAY[CAST(@heldBy AS int)])`,
    { heldBy: heldBy ?? null },
  );
  return row!.n;
}

/** A provider's 2xx answer to a call whose message content is `content` as JSON, as the executor returns it (usage: 15 tokens). */
export const paidAnswerOf = (content: unknown) => ({
  kind: 'response' as const,
  latencyMs: 5,
  httpStatus: 200,
  requestId: null,
  rateLimit: {},
  bodyText: JSON.stringify({
    choices: [{ message: { content: JSON.stringify(content) } }],
    usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
  }),
});

/** `paidAnswerOf` an empty object. */
export const PAID_ANSWER = paidAnswerOf({});

/**
 * A pinned race of two writes behind a third (pg-shared-steps, pg-shared-finishes): `holder` locks the
 * first row both want (the write returns its backend); `first` is then asked, and once it waits for the
 * holder, `second` is; once both wait, the holder commits. Both must commit (a write that fails rejects).
 */
export async function holderThenTwoWrites(
  write: Write,
  sql: Sql,
  holder: (tx: Tx) => Promise<unknown>,
  first: () => Promise<unknown>,
  second: () => Promise<unknown>,
): Promise<void> {
  const hold = pausedWriteBy(
    write,
    async (tx) => {
      await holder(tx);
      return backendPid(tx.sql);
    },
    async () => undefined,
  );
  const holderPid = await hold.reached;
  const waitingFirst = first();
  waitingFirst.catch(() => {});
  await waitUntil(async () => (await writesWaitingFor(sql, holderPid)) === 1, 'the first write to wait for the holder');
  const waitingSecond = second();
  waitingSecond.catch(() => {});
  await waitUntil(async () => (await writesWaitingFor(sql)) === 2, 'the second write to wait too (for the holder, or the first one)');
  hold.go();
  await hold.done;
  for (const r of await Promise.allSettled([waitingFirst, waitingSecond])) if (r.status === 'rejected') throw r.reason;
}

/**
 * Item `id` of child thread `t-<id>` of orchestration `of.parent` (`t-o` unless given: running, leased by
 * `ctx.owner`, its lock held), stories for epic `E<epic>` of project `of.project` (p unless given) recorded
 * as its answer: what a closure of answers then finishes.
 */
export async function storiesAnswered(
  sql: Sql,
  write: Write,
  ctx: EngineContext,
  id: string,
  epic: number,
  of: { project?: string; parent?: string } = {},
): Promise<LedgerRow> {
  const projectId = of.project ?? 'p';
  await insertThread(sql, {
    ...testThreadRow(id),
    kind: 'story_generate_epic',
    status: 'running',
    space_id: projectId,
    parent_thread_id: of.parent ?? 't-o',
    input: JSON.stringify({ project_id: projectId, epic_id: `E${epic}` }),
    target_ref: JSON.stringify({ project_id: projectId, doc_type: 'story_backlog', epic_id: `E${epic}` }),
  });
  const item = testWorkItemRow(id, {
    status: 'running',
    project_id: projectId,
    lock_scope: `${projectId}:${id}`,
    lease_owner: ctx.owner,
    lease_expires_at: Date.now() + 60_000,
  });
  await insertWorkItem(sql, item);
  await acquireLock(sql, { scope: item.lock_scope, owner: id, now: 1, expires_at: null });
  const answer = { stories: simulatedStories(`E${epic}`, `Epic number ${epic}`) };
  return (await write((tx) => recordResponse(tx, ctx, id, paidAnswerOf(answer)))).row;
}
