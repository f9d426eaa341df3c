/**
 * Start-up check on a shared database: leases carry the expiry their daemon's clock computed, and any
 * other daemon decides by its own clock whether that lease has expired. A daemon whose clock runs ahead
 * would take live items from the others (and pay for their calls a second time); one running behind
 * would leave dead daemons' items waiting. So a daemon whose clock is further from the database
 * server's than `database.max_clock_skew` refuses to start, naming both times.
 */
import type { Clock } from '../../core/clock.js';
import { DaemonStartError } from '../../core/errors.js';
import { connectPostgres } from '../../db/pg/connection.js';
import { readServerClock } from '../../db/pg/server-clock.js';

/** The refusal's text when the clocks are further apart than `maxSkewMs`, else null. */
export function clockSkewProblem(p: { daemonMs: number; serverMs: number; maxSkewMs: number; where: string }): string | null {
  const skew = p.daemonMs - p.serverMs;
  if (Math.abs(skew) <= p.maxSkewMs) return null;
  const iso = (ms: number) => new Date(Math.round(ms)).toISOString();
  return (
    `cannot start: this machine's clock (${iso(p.daemonMs)}) is ${(Math.abs(skew) / 1000).toFixed(1)} s ${skew > 0 ? 'ahead of' : 'behind'} ` +
    `the database server's (${iso(p.serverMs)}) at ${p.where}, more than database.max_clock_skew (${p.maxSkewMs / 1000} s). ` +
    `Daemons sharing a database compare lease times stamped by their own clocks: synchronize this machine's clock (NTP), ` +
    `or raise database.max_clock_skew if you accept that leases may be taken over that much early or late.`
  );
}

/** Throws DaemonStartError (exit 1) when this daemon's clock is too far from the server's. */
export async function checkClockSkew(url: string, clock: Clock, maxSkewMs: number, where: string): Promise<void> {
  const client = await connectPostgres(url);
  try {
    const { serverMs, daemonMs } = await readServerClock(client, () => clock.now());
    const problem = clockSkewProblem({ daemonMs, serverMs, maxSkewMs, where });
    if (problem) throw new DaemonStartError(problem, 1);
  } finally {
    await client.end();
  }
}
