/**
 * The database server's clock. Several daemons stamp leases with their own clocks and compare them
 * with each other's stamps: `daemon/runtime/clock-skew.ts` checks at start that this daemon's clock
 * agrees with the server's (and so, within twice the limit, with every other daemon's).
 */
import type pg from 'pg';

/**
 * The server's wall clock now, in ms since the epoch (`clock_timestamp()`: the time of this statement,
 * not of its transaction's start), with the daemon's clock read halfway through the round trip.
 */
export async function readServerClock(client: pg.Client, daemonNow: () => number): Promise<{ serverMs: number; daemonMs: number }> {
  const before = daemonNow();
  const { rows } = await client.query<{ ms: number }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms');
  const after = daemonNow();
  return { serverMs: Number(rows[0]!.ms), daemonMs: (before + after) / 2 };
}
