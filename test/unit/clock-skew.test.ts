/**
 * The start-up clock check of a daemon sharing a Postgres database (runtime/clock-skew.ts): against the
 * real server's clock, a daemon clock within `database.max_clock_skew` passes, one further off either
 * way is refused with an error naming both times, the limit and what to do.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonStartError } from '../../src/core/errors.js';
import { checkClockSkew, clockSkewProblem } from '../../src/daemon/runtime/clock-skew.js';
import { createTestDatabase, type TestDatabase } from '../helpers/postgres.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(() => database?.drop());

const offBy = (ms: number) => ({ now: () => Date.now() + ms });

describe('clock skew with the database server', () => {
  it('passes a daemon whose clock agrees with the server’s', async () => {
    await expect(checkClockSkew(database.url, offBy(0), 5_000, 'postgres://db')).resolves.toBeUndefined();
    await expect(checkClockSkew(database.url, offBy(-2_000), 5_000, 'postgres://db')).resolves.toBeUndefined();
  });

  it('refuses a daemon clock ahead of or behind the server’s by more than the limit, naming both times', async () => {
    const ahead = await checkClockSkew(database.url, offBy(60_000), 5_000, 'postgres://db').catch((e: unknown) => e);
    expect(ahead).toBeInstanceOf(DaemonStartError);
    expect((ahead as DaemonStartError).exitCode).toBe(1);
    expect((ahead as Error).message).toMatch(
      /^cannot start: this machine's clock \(\d{4}-\d\d-\d\dT[\d:.]+Z\) is 60\.\d s ahead of the database server's \(\d{4}-\d\d-\d\dT[\d:.]+Z\) at postgres:\/\/db, more than database\.max_clock_skew \(5 s\)/,
    );
    expect((ahead as Error).message).toContain('synchronize this machine');
    const behind = await checkClockSkew(database.url, offBy(-8_000), 5_000, 'postgres://db').catch((e: unknown) => e);
    expect((behind as Error).message).toMatch(/is 8\.\d s behind the database server's/);
  });

  it('decides by the limit alone', () => {
    expect(clockSkewProblem({ daemonMs: 10_000, serverMs: 5_000, maxSkewMs: 5_000, where: 'x' })).toBeNull();
    expect(clockSkewProblem({ daemonMs: 10_001, serverMs: 5_000, maxSkewMs: 5_000, where: 'x' })).toContain('ahead of');
    const text = clockSkewProblem({ daemonMs: Date.UTC(2026, 0, 1), serverMs: Date.UTC(2026, 0, 1, 0, 0, 10), maxSkewMs: 5_000, where: 'x' });
    expect(text).toContain("this machine's clock (2026-01-01T00:00:00.000Z) is 10.0 s behind the database server's (2026-01-01T00:00:10.000Z)");
  });
});
