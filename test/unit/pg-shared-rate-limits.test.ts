/**
 * The rate limit several daemons share on Postgres (engine/shared-rate-limits.ts over db/rate-limits.ts),
 * on a real server: admission takes from the row's buckets, and a refused call is told when the emptier
 * bucket will hold what it needs — the same answer the in-process limiter's TokenBucket gives — so a
 * parked item is retried when it can go, not sooner (a wasted claim round) nor later (idle capacity).
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sql } from '../../src/core/sql.js';
import { sharedRateLimits } from '../../src/daemon/engine/shared-rate-limits.js';
import { applyPgMigrations } from '../../src/db/pg/migrate.js';
import { PgSql } from '../../src/db/pg/sql.js';
import { createTestDatabase, type TestDatabase, openTestPool } from '../helpers/postgres.js';

let database: TestDatabase;
let pool: pg.Pool;
let sql: Sql;

beforeAll(async () => {
  database = await createTestDatabase();
  await applyPgMigrations(database.url);
  pool = openTestPool(database.url, 2);
  pool.on('error', () => {}); // a pooled connection the server ends at drop
  sql = new PgSql(pool);
});
afterAll(async () => {
  await pool?.end();
  await database?.drop();
});

const T0 = 1_800_000_000_000;

describe('the shared rate limit on Postgres', () => {
  it('admits up to the requests/min bucket, then says when the next request fits', async () => {
    const limits = { requestsPerMinute: 60, tokensPerMinute: null };
    for (let i = 0; i < 60; i++) expect(await sharedRateLimits.admit(sql, 'rpm-route', limits, 100, T0)).toEqual({ ok: true });
    // Empty: one request refills in 60,000 / 60 ms.
    expect(await sharedRateLimits.admit(sql, 'rpm-route', limits, 100, T0)).toEqual({ ok: false, retryAt: T0 + 1000, reason: 'requests per minute' });
    // 400 ms later, 0.4 of a request is back: 600 ms to go.
    expect(await sharedRateLimits.admit(sql, 'rpm-route', limits, 100, T0 + 400)).toEqual({
      ok: false,
      retryAt: T0 + 1000,
      reason: 'requests per minute',
    });
    expect(await sharedRateLimits.admit(sql, 'rpm-route', limits, 100, T0 + 1000)).toEqual({ ok: true });
  });

  it('names the tokens/min bucket when it is the one short, and caps a call bigger than the bucket at the bucket', async () => {
    const limits = { requestsPerMinute: 600, tokensPerMinute: 6000 };
    expect(await sharedRateLimits.admit(sql, 'tpm-route', limits, 5000, T0)).toEqual({ ok: true });
    // 1,000 tokens left; 3,000 needed: 2,000 more at 100 per second.
    expect(await sharedRateLimits.admit(sql, 'tpm-route', limits, 3000, T0)).toEqual({ ok: false, retryAt: T0 + 20_000, reason: 'tokens per minute' });
    // Asking for more than the bucket holds waits for a full bucket, not forever.
    expect(await sharedRateLimits.admit(sql, 'tpm-route', limits, 1_000_000, T0)).toEqual({ ok: false, retryAt: T0 + 50_000, reason: 'tokens per minute' });
  });

  it('gives back what an admission took for a call that will not start, never above the buckets', async () => {
    const limits = { requestsPerMinute: 2, tokensPerMinute: 6000 };
    expect(await sharedRateLimits.admit(sql, 'back-route', limits, 5000, T0)).toEqual({ ok: true });
    expect((await sharedRateLimits.admit(sql, 'back-route', limits, 3000, T0)).ok).toBe(false);
    await sharedRateLimits.giveBack(sql, 'back-route', limits, 5000, T0);
    expect(await sharedRateLimits.admit(sql, 'back-route', limits, 3000, T0)).toEqual({ ok: true });
    expect(await sharedRateLimits.admit(sql, 'back-route', limits, 3000, T0)).toEqual({ ok: true });
    // Both requests taken; three given back fill the buckets to two requests and 6,000 tokens, no more.
    for (let i = 0; i < 3; i++) await sharedRateLimits.giveBack(sql, 'back-route', limits, 3000, T0);
    expect(await sharedRateLimits.admit(sql, 'back-route', limits, 3000, T0)).toEqual({ ok: true });
    expect(await sharedRateLimits.admit(sql, 'back-route', limits, 3000, T0)).toEqual({ ok: true });
    expect((await sharedRateLimits.admit(sql, 'back-route', limits, 1, T0)).ok).toBe(false);
  });

  it('holds every caller back while a 429 parks the route, whatever the buckets hold, until it is lifted', async () => {
    const limits = { requestsPerMinute: 60, tokensPerMinute: null };
    await sharedRateLimits.park(sql, 'parked-route', T0 + 30_000, T0);
    const parked = { ok: false, retryAt: T0 + 30_000, reason: 'rate limited by the provider (429)' };
    expect(await sharedRateLimits.admit(sql, 'parked-route', limits, 1, T0)).toEqual(parked);
    expect(await sharedRateLimits.admit(sql, 'parked-route', { requestsPerMinute: null, tokensPerMinute: null }, 1, T0)).toEqual(parked);
    await sharedRateLimits.unpark(sql, 'parked-route');
    expect(await sharedRateLimits.admit(sql, 'parked-route', limits, 1, T0)).toEqual({ ok: true });
  });
});
