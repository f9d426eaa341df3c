/**
 * One racer of the schedule race test: a separate OS process running the real App (engine, scheduler,
 * writer) on a database shared with another racer (the run's backend: a SQLite file or Postgres). The scheduler's clock is a fake one that the
 * racer moves through N daily periods, ticking at each; the engine runs on real time and calls the
 * simulator for whatever work its scheduler started.
 *
 *   node --import tsx schedule-race-worker.ts <home> <first-period-ms> <periods>
 *
 * Prints `ready` once started. Then, in lockstep with the other racer, for each period: waits for `go`
 * on stdin, ticks, prints `ticked`. Finally it waits until every run in the database is finalized and
 * prints its tally as JSON.
 */
import { createInterface } from 'node:readline';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';

const DAY = 86_400_000;
const [home, firstArg, periodsArg] = process.argv.slice(2);
const first = Number(firstArg);
const periods = Number(periodsArg);

const clock = { t: first - DAY, now: () => clock.t };
const config = loadConfig(home!, process.env);
const app = new App({
  // The fake clock spans months: no stale re-claims and no periodic lease recovery inside that span.
  config: { ...config, recoveryIntervalMs: 3_600_000, scheduler: { staleAfterMs: 100 * 365 * DAY, misfireGraceMs: 60_000 } },
  logger: createLogger(null, 'silent'),
  schedulerClock: clock,
});
await app.start();
process.stdout.write('ready\n');
const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();

const tally = { won: 0, lost: 0, lost_at_insert: 0, started: 0, won_periods: [] as string[] };
for (let i = 0; i < periods; i++) {
  await lines.next();
  clock.t = first + i * DAY + 1000;
  const r = await app.scheduler.tick();
  tally.won += r.claimed.length;
  tally.lost += r.lost;
  tally.lost_at_insert += r.lostAtInsert;
  tally.started += r.outcomes.started;
  tally.won_periods.push(...r.claimed.map((c) => c.period_key));
  process.stdout.write('ticked\n');
}

// Both racers' engines work the shared queue; wait until no run is left pending.
const deadline = Date.now() + 90_000;
const count = async (text: string) => (await app.reader.get<{ n: number }>(text))!.n;
while (
  (await count("SELECT count(*) AS n FROM schedule_runs WHERE status = 'pending'")) > 0 ||
  (await count('SELECT count(*) AS n FROM schedule_runs')) < periods
) {
  if (Date.now() > deadline) throw new Error('runs still pending after 90 s');
  await new Promise((r) => setTimeout(r, 20));
}
process.stdin.destroy();
await app.shutdown(5000);
process.stdout.write(`${JSON.stringify(tally)}\n`);
