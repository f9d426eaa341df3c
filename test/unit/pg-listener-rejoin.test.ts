/**
 * A follower that arrives while the last one leaves (RemoteChanges: `void unlisten()`, then `listen()`):
 * the LISTEN session must end up listening, and the new follower's `listenAlso` resolve only once it does
 * (db/pg/notifications.ts `applyChannel`). The first case is the review's repro of issue 18's gated
 * follow (it lost the LISTEN then); the second, a leave and a join around a reconnect, lost it without
 * the one queue of changes (UNLISTEN went out after the LISTEN). Deterministic: microtask ticks, no timing.
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

describe('PgListener rejoin', () => {
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
  const inTransaction = async (notes: Notification[]) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query(commitQuery(client, [], notes, true).text);
    } finally {
      client.release();
    }
  };
  /** Whether `listener` ends up listening to combine_events: a notification on it, then a marker on a channel always listened to. */
  const listensToEvents = async (got: Notification[], tag: string) => {
    await inTransaction([{ channel: 'combine_events', payload: `events-${tag}` }]);
    await inTransaction([{ channel: 'combine_work', payload: `marker-${tag}` }]);
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
