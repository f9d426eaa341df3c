/**
 * The LISTEN session of a daemon on a shared Postgres (db/pg/notifications.ts): notifications sent in a
 * transaction arrive at its COMMIT and never for a rollback; a session the server drops is reconnected
 * and says so (the daemon then catches up by reading), and later notifications arrive again.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { commitQuery } from '../../src/db/pg/commit-query.js';
import { type Notification, PgListener } from '../../src/db/pg/notifications.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';

async function until(what: string, fn: () => boolean): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!fn()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('Postgres LISTEN session', () => {
  let database: TestDatabase;
  let pool: pg.Pool;
  beforeAll(async () => {
    database = await createTestDatabase();
    pool = openTestPool(database.url, 2);
  });
  afterAll(async () => {
    await pool.end();
    await database.drop();
  });

  const inTransaction = async (notes: Notification[], end: 'COMMIT' | 'ROLLBACK') => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // The writer's own COMMIT query (its notification statement); a rolled-back one ends in ROLLBACK instead.
      const { text } = commitQuery(client, [], notes, true);
      await client.query(end === 'COMMIT' ? text : text.replace(/COMMIT$/, 'ROLLBACK'));
    } finally {
      client.release();
    }
  };

  it('delivers at commit, never for a rollback, and reconnects after the server drops it', async () => {
    const got: Notification[] = [];
    let reconnects = 0;
    let failures = 0;
    const listener = new PgListener(database.url, ['combine_work', 'combine_events'], {
      notified: (n) => got.push(n),
      reconnected: () => reconnects++,
      failed: () => failures++,
    });
    await listener.start();
    try {
      await inTransaction([{ channel: 'combine_events', payload: 'rolled-back:1:' }], 'ROLLBACK');
      await inTransaction(
        [
          { channel: 'combine_work', payload: '' },
          { channel: 'combine_events', payload: 't1:7:' },
        ],
        'COMMIT',
      );
      await until('the committed notifications', () => got.length >= 2);
      expect(got).toEqual([
        { channel: 'combine_work', payload: '' },
        { channel: 'combine_events', payload: 't1:7:' },
      ]);

      // The server ends the listening session (a restart, a network cut, an idle-session timeout).
      await pool.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE 'LISTEN%' AND datname = current_database() AND pid <> pg_backend_pid()",
      );
      await until('the reconnect', () => reconnects === 1);
      expect(failures).toBeGreaterThanOrEqual(1);
      await inTransaction([{ channel: 'combine_events', payload: 't2:9:p' }], 'COMMIT');
      await until('a notification after the reconnect', () => got.length >= 3);
      expect(got[2]).toEqual({ channel: 'combine_events', payload: 't2:9:p' });
    } finally {
      await listener.close();
    }
  });

  it('listens to a channel added while it runs from the first commit after the LISTEN, stops after UNLISTEN, and a reconnect keeps the current set', async () => {
    const got: Notification[] = [];
    let reconnects = 0;
    const listener = new PgListener(database.url, ['combine_work'], { notified: (n) => got.push(n), reconnected: () => reconnects++, failed: () => {} });
    await listener.start();
    try {
      const events = (payload: string) => [{ channel: 'combine_events', payload }];
      await inTransaction(events('before'), 'COMMIT'); // nobody listens to it yet
      await listener.listenAlso('combine_events');
      await inTransaction(events('first-after'), 'COMMIT');
      await until('the first notification after the LISTEN', () => got.length >= 1);
      await listener.unlisten('combine_events');
      await inTransaction(events('after-unlisten'), 'COMMIT');
      // A marker on the channel still listened to: everything committed before it has been delivered by then.
      await inTransaction([{ channel: 'combine_work', payload: 'marker-1' }], 'COMMIT');
      await until('the marker', () => got.some((n) => n.payload === 'marker-1'));
      expect(got.map((n) => n.payload)).toEqual(['first-after', 'marker-1']);

      await listener.listenAlso('combine_events');
      await pool.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%LISTEN%' AND datname = current_database() AND pid <> pg_backend_pid()",
      );
      await until('the reconnect', () => reconnects === 1);
      await inTransaction(events('after-reconnect'), 'COMMIT');
      await until('a notification on the added channel after the reconnect', () => got.some((n) => n.payload === 'after-reconnect'));
    } finally {
      await listener.close();
    }
  });

  it('a LISTEN that fails ends the session: it says so, reconnects and listens to the set, instead of counting the channel as listened to', async () => {
    const got: Notification[] = [];
    let reconnects = 0;
    const failures: string[] = [];
    const listener = new PgListener(database.url, ['combine_work'], {
      notified: (n) => got.push(n),
      reconnected: () => reconnects++,
      failed: (err) => failures.push(err.message),
    });
    await listener.start();
    try {
      // A channel Postgres refuses (a zero-length identifier): its LISTEN fails on a session that is up.
      await listener.listenAlso('');
      expect(failures[0]).toMatch(/zero-length/);
      // The reconnect listens to the set, '' included, so it fails too until the channel is gone.
      await listener.unlisten('');
      await until('the reconnect', () => reconnects === 1);
      await inTransaction([{ channel: 'combine_work', payload: 'after-reconnect' }], 'COMMIT');
      await until('a notification after the reconnect', () => got.some((n) => n.payload === 'after-reconnect'));
    } finally {
      await listener.close();
    }
  });

  // A follower that arrives while the last one leaves (RemoteChanges: `void unlisten()`, then `listen()`): the
  // session must end up listening, and the new follower's `listenAlso` resolve only once it does (applyChannel).
  // The first case is the review's repro of issue 18's gated follow (it lost the LISTEN then); the second, a
  // leave and a join around a reconnect, lost it without the one queue of changes (UNLISTEN went out after the
  // LISTEN). Deterministic: microtask ticks, no timing.
  /** Whether `listener` ends up listening to combine_events: a notification on it, then a marker on a channel always listened to. */
  const listensToEvents = async (got: Notification[], tag: string) => {
    await inTransaction([{ channel: 'combine_events', payload: `events-${tag}` }], 'COMMIT');
    await inTransaction([{ channel: 'combine_work', payload: `marker-${tag}` }], 'COMMIT');
    await until('the marker', () => got.some((n) => n.payload === `marker-${tag}`));
    return got.some((n) => n.payload === `events-${tag}`);
  };

  it('a follower that arrives while the last one leaves is still notified, whichever tick it arrives on', async () => {
    for (let ticks = 0; ticks < 8; ticks++) {
      const got: Notification[] = [];
      const listener = new PgListener(database.url, ['combine_work'], { notified: (n) => got.push(n), reconnected: () => {}, failed: () => {} });
      await listener.start();
      try {
        await listener.listenAlso('combine_events');
        const leaving = listener.unlisten('combine_events');
        for (let t = 0; t < ticks; t++) await null;
        await listener.listenAlso('combine_events');
        await leaving;
        expect(await listensToEvents(got, `${ticks}`), `arriving ${ticks} ticks after the last one left`).toBe(true);
      } finally {
        await listener.close();
      }
    }
  });

  it('a follower that arrives while the last one leaves as the session reconnects is still notified, whichever tick it arrives on', async () => {
    for (let ticks = 0; ticks < 12; ticks++) {
      const got: Notification[] = [];
      let rejoined: Promise<void> | null = null;
      let leaving: Promise<void> | null = null;
      const listener: PgListener = new PgListener(database.url, ['combine_work'], {
        notified: (n) => got.push(n),
        // The reconnect makes the followers re-read; the last one leaves then, and a new one comes `ticks` later.
        reconnected: () => {
          leaving = listener.unlisten('combine_events');
          void (async () => {
            for (let t = 0; t < ticks; t++) await null;
            rejoined = listener.listenAlso('combine_events');
          })();
        },
        failed: () => {},
      });
      await listener.start();
      try {
        await listener.listenAlso('combine_events');
        await pool.query(
          "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%LISTEN%' AND datname = current_database() AND pid <> pg_backend_pid()",
        );
        await until('the reconnect and the new follower', () => rejoined !== null);
        await Promise.all([leaving, rejoined]);
        expect(await listensToEvents(got, `r${ticks}`), `arriving ${ticks} ticks after the last one left`).toBe(true);
      } finally {
        await listener.close();
      }
    }
  });
});
