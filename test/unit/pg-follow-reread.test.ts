/**
 * `--follow` with several daemons on one Postgres (follow-stream.ts): another daemon's change makes the
 * stream re-read the family's statuses. A re-read that read a child's status just before a local write
 * committed its end — whose event is published while the re-read is still reading — must not queue that
 * older status after the event: the child would step back (complete, running, complete). The race is
 * pinned, not timed: the stream reads through a handle that holds the re-read's child listing until the
 * test has committed and published the child's end. Real Postgres, the real stream, bus and remote changes.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql, SqlParams } from '../../src/core/sql.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { insertThread, transitionThread } from '../../src/db/threads.js';
import { type EngineEvent, EventBus } from '../../src/daemon/engine/events.js';
import { RemoteChanges } from '../../src/daemon/runtime/cluster-changes.js';
import { type FollowMessage, followThread } from '../../src/daemon/services/follow-stream.js';
import { waitUntil } from '../helpers/harness.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';
import { testThreadRow } from '../helpers/rows.js';

let database: TestDatabase;
let pool: pg.Pool;
let db: PgSql;

beforeAll(async () => {
  database = await createTestDatabase({ migrated: true });
  pool = openTestPool(database.url, 2);
  db = new PgSql(pool);
});
afterAll(async () => {
  await pool?.end();
  await database?.drop();
});

/** `sql`, except that once armed, its next listing of a thread's children returns only when released. */
function holdingChildListing(sql: Sql) {
  let armed: { reached: () => void; released: Promise<void> } | null = null;
  const handle: Sql = {
    dialect: sql.dialect,
    connection: sql.connection,
    get: <T>(text: string, params?: SqlParams) => sql.get<T>(text, params),
    run: (text: string, params?: SqlParams) => sql.run(text, params),
    async all<T>(text: string, params?: SqlParams): Promise<T[]> {
      const rows = await sql.all<T>(text, params);
      const hold = armed;
      if (hold && text.includes('WHERE parent_thread_id = ?')) {
        armed = null;
        hold.reached();
        await hold.released;
      }
      return rows;
    },
  };
  const arm = () => {
    let reached!: () => void;
    let release!: () => void;
    const atListing = new Promise<void>((r) => (reached = r));
    armed = { reached, released: new Promise<void>((r) => (release = r)) };
    return { atListing, release };
  };
  return { handle, arm };
}

const threadEvent = (id: string, status: string): EngineEvent => ({
  type: 'thread',
  thread_id: id,
  parent_thread_id: id === 't-p' ? null : 't-p',
  trace_id: null,
  status,
  kind: 'k',
  target_ref: {} as never,
});

describe('a follow stream re-reading while a local write ends a child', () => {
  it('shows the child end once: the status the re-read read before that commit is not queued after its event', async () => {
    await insertThread(db, { ...testThreadRow('p'), role: 'orchestration', status: 'running' });
    await insertThread(db, { ...testThreadRow('c'), parent_thread_id: 't-p', status: 'running' });
    const bus = new EventBus();
    const remote = new RemoteChanges();
    const { handle, arm } = holdingChildListing(db);
    const abort = new AbortController();
    const stream = followThread(handle, bus, 't-p', abort.signal, remote);

    const first = [(await stream.next()).value, (await stream.next()).value] as FollowMessage[];
    expect(first.map((m) => m.event)).toEqual(['snapshot', 'thread']); // the snapshot, then the child running
    const seen: FollowMessage[] = [];
    const reading = (async () => {
      for (let r = await stream.next(); !r.done; r = await stream.next()) seen.push(r.value);
    })();

    // Another daemon changed the family: the stream re-reads, and lists the child (running) ...
    const hold = arm();
    remote.publish({ threadId: 't-c', parentThreadId: 't-p' });
    await hold.atListing;
    // ... then this daemon's write ends the child, committed and published before the re-read goes on.
    await transitionThread(db, { id: 't-c', parent_thread_id: 't-p' }, 'running', 'complete', 2);
    bus.publish([threadEvent('t-c', 'complete')]);
    hold.release();
    await waitUntil(() => seen.some((m) => m.event === 'thread' && m.thread_id === 't-c'), 'the child end to be streamed');

    await transitionThread(db, { id: 't-p', parent_thread_id: null }, 'running', 'complete', 3);
    bus.publish([threadEvent('t-p', 'complete')]);
    await reading;
    const child = seen.filter((m) => m.event === 'thread' && m.thread_id === 't-c').map((m) => (m as { status: string }).status);
    expect(child).toEqual(['complete']);
    expect(seen.at(-1)?.event).toBe('end');
  });
});
