/**
 * Diagnosis of target 9 (not part of the bench): where the CPU and the serialization go on Postgres
 * (from the pg-scale-diag branch, without its chain-head instrumentation).
 *
 *   npx tsx bench/diag-pg.ts engine          # in-process engine, instant provider: statements/xacts per item, server vs client CPU
 *   npx tsx bench/diag-pg.ts scale 1 2 3     # N real daemons, sim 200 ms: per-process CPU, wait-event samples, statements per item
 *
 * The daemons (and the engine) reach the server through its Unix socket, as bench target 9's do; DIAG_TCP=1 through loopback TCP.
 * BENCH_PROFILE_DIR works as in the bench (daemon --cpu-prof; engine profile). DIAG_TRACK_ALL=1 lists the statements run
 * inside functions and triggers (foreign-key checks, plpgsql) as statements of their own; DIAG_STATEMENTS=<n> lists n
 * statements (45). DIAG_HOLDS=1 logs every statement of the measured run and prints the closures of answers' document-head
 * waits and holds (bench/lib/head-holds.ts; the log slows the server: CPU figures from a run without it). DIAG_PROJECTS / DIAG_EPICS size scale's run (6 × 160), after each daemon's warm-up project of
 * DIAG_WARMUP_EPICS (3,000, as bench target 9's; 0: none). DIAG_EXPLAIN=<file> logs every statement's plan there (see main).
 * DIAG_SETUP_SQL=<file> runs the file in scale's database once the daemons have migrated it (a variant of a function, to try);
 * DIAG_PG_FLAGS='name=value …' starts the server with these settings (`-c`), to try one.
 * DIAG_V8_LOG=<dir> has each daemon write V8's log of its JIT there (bench/lib/v8-log.ts) and prints, once the daemons have
 * exited, TurboFan's compiles, recompiles (of them, those with no deopt since: a GC drop or after OSR) and deopts per daemon
 * in its start and warm-up, the projects' import, the run's generate-all and the run after it, and that last window's
 * functions and deopt sites (every window's in a file).
 * DIAG_PERF=<file> records the server's processes and the daemons' with `perf` (DIAG_PERF_CALLGRAPH=1: dwarf call graphs, for
 * bench/perf-summary.mjs; DIAG_PERF_CALLGRAPH=fp: frame pointers, which V8's JIT code keeps: with
 * BENCH_DAEMON_FLAGS='--perf-basic-prof-only-functions --interpreted-frames-native-stack', bench/perf-daemons.mjs
 * splits the daemons' CPU by owner: pg driver, provider call, the engine's JavaScript, GC, event loop, TurboFan).
 * DIAG_SLOTS=1: scale's run prints each daemon's call-slot occupancy (its ramp-up, steady middle and ramp-down) and
 * where a slot's cycle goes (bench/lib/slot-occupancy.ts). It installs a trigger that notes each claim's daemon in an
 * unlogged side table (one more trigger call and INSERT per claim) and starts the server with track_commit_timestamp:
 * the server's CPU, rows written and transactions' work per item then do not compare with runs without it.
 * `scale 1 3` ends with the per-item counts (transactions, rows written per table, calls and rows per statement) that differ
 * between the first run and the last (bench/lib/per-item-counts.ts): what grows with the number of daemons.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import pg from 'pg';
import { createSimulator } from '../src/sim/simulator.js';
import { adminQuery, databaseUrl, startPostgres, type PostgresServer } from '../test/helpers/postgres-server.js';
import { BenchDaemon, projectFile } from './lib/daemon.js';
import { HOLDS_LOG_FLAGS, holdsLogSink, printHeadHolds, startHoldsLog, stopHoldsLog } from './lib/head-holds.js';
import { runEngineOnce } from './lib/engine-run.js';
import { printPerItemGrowth, printPerItemTotals, readPerItemCounts, type PerItemCounts } from './lib/per-item-counts.js';
import { startPerf, stopPerf } from './lib/perf-record.js';
import { explainBenchPoll, perItem, printItemPhases, printWalByRelation, report, resetStats, startWaitSampler } from './lib/pg-report.js';
import { postmasterPid, processCpuMicros, serverCpuMicros, threadCpuDelta, threadCpuMicros } from './lib/proc.js';
import { printSlotOccupancy, recordClaimOwners } from './lib/slot-occupancy.js';
import { sleep } from './lib/stats.js';
import { reportDaemonJit, v8LogFlags, type LoggedDaemon, type RunMarks } from './lib/v8-log.js';

/** scale's run: generate-all over this many projects of this many epics (an orchestration per project, a child per epic). */
const PROJECTS = Number(process.env.DIAG_PROJECTS ?? 6);
const EPICS = Number(process.env.DIAG_EPICS ?? 160);
/**
 * Before scale's measured run each daemon runs a warm-up project of its own of this many epics (DIAG_WARMUP_EPICS, 3,000 as
 * bench target 9's since 2026-11-26 12:00, 800 before; 0: none, as this tool ran until 2026-11-25 15:00). Without it the daemons' other threads' CPU is mostly
 * V8's concurrent compiler compiling the daemon's code, which the bench's row does not measure.
 */
const WARMUP_EPICS = Number(process.env.DIAG_WARMUP_EPICS ?? 3000);
/**
 * DIAG_HOLDS=1: the statement log of the measured run, read for the document heads' waits and holds (bench/lib/head-holds.ts),
 * written to this file (~100 MB per 2,880-item run), deleted at the end unless DIAG_HOLDS_KEEP=1 (to read it again).
 */
const HOLDS = process.env.DIAG_HOLDS === '1';
const HOLDS_LOG = `/tmp/diag-pg-holds-${process.pid}.log`;
/** DIAG_SLOTS=1: the call slots' occupancy and cycle (bench/lib/slot-occupancy.ts), with its trigger and commit timestamps. */
const SLOTS = process.env.DIAG_SLOTS === '1';
/** DIAG_V8_LOG=<dir>: each daemon's V8 log of its JIT, read for TurboFan's compiles and deopts (see the file's comment). */
const V8_LOG = process.env.DIAG_V8_LOG;

/** Process `pid`'s CPU ms so far (user + system). */
const procCpuMs = (pid: number): number => processCpuMicros(pid) / 1000;

/** The CPU ms so far of the server on `port`: its postmaster, reaped children and live children. */
const serverCpuMs = (port: number): number => serverCpuMicros(postmasterPid(port)) / 1000;

/** Counts the notifications the daemons send (one more listener: what each daemon receives), by channel and `combine_work` payload. */
async function countNotifications(url: string): Promise<{ pid: number; stop(): Promise<Map<string, number>> }> {
  const counts = new Map<string, number>();
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  c.on('notification', (m) => {
    const key = m.channel === 'combine_work' ? `${m.channel}:${m.payload}` : m.channel;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  });
  for (const ch of ['combine_work', 'combine_events', 'combine_cancel']) await c.query(`LISTEN ${ch}`);
  const pid = Number((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
  return {
    pid,
    stop: async () => {
      await c.end();
      return counts;
    },
  };
}

async function withDatabase<T>(server: PostgresServer, fn: (url: string) => Promise<T>): Promise<T> {
  const name = `combine_diag_${randomBytes(6).toString('hex')}`;
  await adminQuery(server.adminUrl, `CREATE DATABASE ${name}`);
  try {
    return await fn(databaseUrl(server.adminUrl, name));
  } finally {
    await adminQuery(server.adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
}

/** The database URL the daemons and the engine use: through the server's Unix socket, as bench target 9's daemons; DIAG_TCP=1: loopback TCP. */
function clientUrl(server: PostgresServer, url: string): string {
  return process.env.DIAG_TCP ? url : server.viaSocket(url);
}

async function engine(server: PostgresServer, port: number, admin: pg.Client): Promise<void> {
  await withDatabase(server, async (url) => {
    const dbName = new URL(url).pathname.slice(1);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    await c.end();
    // runEngineOnce seeds then runs; reset just before is not possible from here, so count the seed too
    // and subtract a seed-only run's counts (below) by running the seed separately is overkill: we reset
    // after seeding through a hook-free approach — measure the totals and a second, seed-only figure.
    // Round trips: every query node-postgres sends (pool queries go through a client's too) is one.
    let roundTrips = 0;
    const send = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      roundTrips++;
      return (send as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof send;
    let s0 = 0;
    let t0 = 0;
    let trips0 = 0;
    let perf: ChildProcess | undefined;
    const r = await runEngineOnce({
      projects: 200,
      epicsPerProject: 10,
      maxInFlight: 256,
      databaseUrl: clientUrl(server, url),
      onSeeded: async () => {
        await resetStats(admin);
        perf = startPerf(port);
        s0 = serverCpuMs(port);
        t0 = performance.now();
        trips0 = roundTrips;
      },
    });
    pg.Client.prototype.query = send;
    await stopPerf(perf);
    const trips = roundTrips - trips0;
    const serverMs = serverCpuMs(port) - s0;
    console.log(
      `engine: ${r.perSecond.toFixed(1)} items/s, round trips ${(trips / r.items).toFixed(1)}/item, client CPU ${r.cpuMicrosPerItem.toFixed(0)} µs/item (run only), server CPU (run) ${((serverMs * 1000) / r.items).toFixed(0)} µs/item, wall ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const dbClient = new pg.Client({ connectionString: url });
    await dbClient.connect();
    try {
      await report(admin, dbName, r.items, dbClient);
    } finally {
      await dbClient.end();
    }
  });
}

/** Each daemon's own project of WARMUP_EPICS epics, generated and applied (as bench target 9's warm-up): the items it applied. */
async function warmUp(daemons: readonly BenchDaemon[], client: pg.Client): Promise<number> {
  const projects = daemons.map((_, i) => `w${i}`);
  for (const [i, p] of projects.entries()) await daemons[i]!.importProject(projectFile(p, WARMUP_EPICS));
  await Promise.all(projects.map((p, i) => daemons[i]!.client.generate.all.mutate({ project_id: p, force: false, deadline_ms: null, created_by: 'bench' })));
  const items = projects.length * WARMUP_EPICS;
  for (;;) {
    const { rows } = await client.query<{ n: string }>("SELECT count(*) AS n FROM llm_work_items WHERE status = 'applied'");
    if (Number(rows[0]!.n) >= items) return items;
    await sleep(50);
  }
}

async function scale(server: PostgresServer, port: number, admin: pg.Client, count: number): Promise<PerItemCounts> {
  let calls = 0;
  const sim = await createSimulator({ latencyMs: 200, onCall: () => calls++ });
  const config = { engine: { max_in_flight: 32 }, pressure: { enabled: false } };
  try {
    return await withDatabase(server, async (url) => {
      const dbName = new URL(url).pathname.slice(1);
      const daemons = Array.from({ length: count }, () => BenchDaemon.inTempHome(sim.url, config, clientUrl(server, url)));
      // Each daemon's sessions named after it in the server's statement log (DIAG_HOLDS).
      for (const [i, d] of daemons.entries()) d.env.PGAPPNAME = `diag-d${i}`;
      // DIAG_V8_LOG: V8 writes nothing to a directory that is not there (the log went to the daemon's ignored stdout), and
      // buffers its file: the daemons exit by SIGTERM, and the logs are read after (reportDaemonJit).
      if (V8_LOG) {
        mkdirSync(V8_LOG, { recursive: true });
        for (const d of daemons) d.stopGracefully = true;
      }
      const items = PROJECTS * EPICS;
      const logged: LoggedDaemon[] = [];
      let marks: RunMarks | undefined;
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      try {
        for (const d of daemons) {
          await d.start(V8_LOG ? v8LogFlags(V8_LOG) : []);
          logged.push({ pid: d.pid, spawnedAt: d.spawnedAt });
        }
        // DIAG_SETUP_SQL=<file>: run once the daemons have migrated the database (to try a variant of a function).
        if (process.env.DIAG_SETUP_SQL) await client.query(readFileSync(process.env.DIAG_SETUP_SQL, 'utf8'));
        // Each claim's daemon, which the item's row forgets at its end: for the slot occupancy (slot-occupancy.ts).
        if (SLOTS) await recordClaimOwners(client);
        const warmUpItems = WARMUP_EPICS > 0 ? await warmUp(daemons, client) : 0;
        const warmedWall = Date.now();
        calls = 0;
        const projects = Array.from({ length: PROJECTS }, (_, p) => `p${p}`);
        for (const [i, p] of projects.entries()) await daemons[i % count]!.importProject(projectFile(p, EPICS));
        const walFrom = await resetStats(admin);
        // pg_stat_reset() resets the counters of the database it runs in: the measured one's tables and functions too.
        await client.query('SELECT pg_stat_reset()');
        if (HOLDS) await startHoldsLog(admin, HOLDS_LOG);
        const perf = startPerf(
          port,
          daemons.map((d) => d.pid),
        );
        const sim0 = process.cpuUsage();
        const d0 = daemons.map((d) => procCpuMs(d.pid));
        const t0 = daemons.map((d) => threadCpuMicros(d.pid));
        const notes = await countNotifications(url);
        // The daemons' LISTEN sessions' backends (their last statement a LISTEN): what delivering notifications costs the server.
        const listeners = (
          await client.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> $1", [
            notes.pid,
          ])
        ).rows.map((r) => r.pid);
        const l0 = listeners.map((p) => procCpuMs(p));
        const s0 = serverCpuMs(port);
        const started = performance.now();
        const startedWall = Date.now();
        // This tool's own backends (the sampler's, the poll's, the notification counter's) are the server's processes
        // too: their CPU is left out of the server's per item, and shown apart.
        const clientPid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        const clientCpu0 = procCpuMs(clientPid);
        const notesCpu0 = procCpuMs(notes.pid);
        const sampler = startWaitSampler(url);
        await Promise.all(
          projects.map((p, i) => daemons[i % count]!.client.generate.all.mutate({ project_id: p, force: false, deadline_ms: null, created_by: 'bench' })),
        );
        // The daemons' CPU when every item is queued (generate-all returned) and when half are applied: what the
        // queueing costs, and the first half of the run (each daemon's JIT warming up) against the second.
        const daemonsCpu = () => daemons.reduce((a, d) => a + procCpuMs(d.pid), 0);
        const queuedCpu = daemonsCpu();
        const queuedAt = performance.now();
        const queuedWall = Date.now();
        let halfCpu = 0;
        let applied = 0;
        // Polled every 250 ms (every 50 ms until 2026-11-26: its sequential scans of llm_work_items were ~8 % of the
        // server's CPU samples, counted in the server's CPU per item); when each item ended is read afterwards.
        while (applied < items) {
          await sleep(250);
          const { rows } = await client.query<{ n: string }>("SELECT count(*) AS n FROM llm_work_items WHERE status = 'applied'");
          applied = Number(rows[0]!.n) - warmUpItems;
          if (halfCpu === 0 && applied >= items / 2) halfCpu = daemonsCpu();
        }
        // When each tenth of the items was applied (s from the first submit; `finished_at` is the daemons' Date.now(),
        // this process's clock): the run's fill, steady part and drain.
        const ends = (
          await client.query<{ t: string }>(
            "SELECT finished_at AS t FROM llm_work_items WHERE status = 'applied' AND project_id = ANY($1::text[]) ORDER BY finished_at",
            [projects],
          )
        ).rows.map((r) => Number(r.t));
        const tenths = Array.from({ length: 10 }, (_, i) => (ends[Math.ceil(((i + 1) * ends.length) / 10) - 1]! - startedWall) / 1000);
        const steady = (0.8 * items) / (tenths[8]! - tenths[0]!);
        console.log(
          `timeline (s from the first submit): generate-all returned ${((queuedAt - started) / 1000).toFixed(1)}; 10 %…100 % applied at ${tenths.map((t) => t.toFixed(1)).join(' ')}; items/s between 10 % and 90 %: ${steady.toFixed(1)}`,
        );
        const endedWall = Date.now();
        const dSum = daemonsCpu();
        const dSum0 = d0.reduce((a, c) => a + c, 0);
        const secs = (performance.now() - started) / 1000;
        await stopPerf(perf);
        const { waits, samples, commitWaits, holders, samplerCpuMs: samplerCpu } = await sampler.stop();
        const dCpu = daemons.map((d, i) => procCpuMs(d.pid) - d0[i]!);
        const t1 = daemons.map((d) => threadCpuMicros(d.pid));
        const dThreads = t1.map((t, i) => ({ main: t.main - t0[i]!.main, other: t.other - t0[i]!.other })); // µs
        const byKind = threadCpuDelta(t0, t1);
        const notesCpu = procCpuMs(notes.pid) - notesCpu0;
        const sent = await notes.stop();
        const lCpu = listeners.reduce((a, p, i) => a + procCpuMs(p) - l0[i]!, 0);
        const ownCpu = samplerCpu + notesCpu + procCpuMs(clientPid) - clientCpu0;
        const sCpu = serverCpuMs(port) - s0 - ownCpu;
        const bench = process.cpuUsage(sim0);
        console.log(
          `\n=== ${count} daemon(s): ${(items / tenths[9]!).toFixed(1)} items/s, ${tenths[9]!.toFixed(1)} s, calls/item ${(calls / items).toFixed(2)}`,
        );
        console.log(
          `CPU per item (µs): daemons ${dCpu.map((c) => ((c * 1000) / items).toFixed(0)).join(' + ')}; server ${((sCpu * 1000) / items).toFixed(0)} (this tool's own backends ${((ownCpu * 1000) / items).toFixed(0)} more, left out; until 2026-11-26 counted in); bench+sim ${((bench.user + bench.system) / items).toFixed(0)}`,
        );
        console.log(
          `CPU utilisation (cores): daemons ${dCpu.map((c) => (c / 1000 / secs).toFixed(2)).join(' + ')}; server ${(sCpu / 1000 / secs).toFixed(2)}; bench+sim ${((bench.user + bench.system) / 1e6 / secs).toFixed(2)}`,
        );
        console.log(
          `daemons' CPU per item (µs, summed): queueing (generate-all) ${(((queuedCpu - dSum0) * 1000) / items).toFixed(0)}; first half of the run ${(((halfCpu - queuedCpu) * 2000) / items).toFixed(0)}; second half ${(((dSum - halfCpu) * 2000) / items).toFixed(0)}`,
        );
        console.log(
          `daemon CPU per item by thread (µs): main ${dThreads.map((t) => (t.main / items).toFixed(0)).join(' + ')}; other threads (V8 compilers, GC helpers, libuv) ${dThreads.map((t) => (t.other / items).toFixed(0)).join(' + ')}`,
        );
        console.log(
          `daemons' CPU per item by thread name (µs, summed over the daemons): ${[...byKind.entries()]
            .sort((a, b) => b[1] - a[1])
            .map(([kind, micros]) => `${kind} ${(micros / items).toFixed(0)}`)
            .join(', ')}`,
        );
        console.log(`notifications sent per item (each reaches every daemon): ${[...sent.entries()].map(([k, v]) => `${k} ${perItem(v, items)}`).join(', ')}`);
        console.log(
          `the LISTEN sessions' backends (${listeners.length}, this tool's own excluded): ${((lCpu * 1000) / items).toFixed(0)} µs of server CPU per item`,
        );
        console.log(`lock waits in COMMIT queries (the chain head first): ${(commitWaits / samples).toFixed(2)} backends on average`);
        const blocked = [...holders.values()].reduce((a, b) => a + b, 0);
        console.log(
          `what the transactions they wait for are doing (share of ${blocked} waits): ${[...holders.entries()]
            .sort((a, b) => b[1] - a[1])
            .map(([k, v]) => `${k} ${((100 * v) / Math.max(blocked, 1)).toFixed(0)} %`)
            .join(', ')}`,
        );
        await printItemPhases(client, projects);
        if (SLOTS) await printSlotOccupancy(client, projects, startedWall, config.engine.max_in_flight);
        marks = { warmed: warmedWall, started: startedWall, queued: queuedWall, ended: endedWall };
        if (HOLDS) {
          await stopHoldsLog(admin);
          printHeadHolds(HOLDS_LOG, items, secs * 1000);
        }
        console.log(`wait-event samples (${samples} samples; average active backends per state):`);
        for (const [k, v] of [...waits.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${(v / samples).toFixed(2).padStart(6)}  ${k}`);
        await report(admin, dbName, items, client);
        await printWalByRelation(client, walFrom, items);
        // Read before the bench poll's EXPLAIN, whose statements are not the daemons' work.
        const counts = await readPerItemCounts(admin, dbName, client, items, count);
        printPerItemTotals(counts);
        await explainBenchPoll(client, projects);
        return counts;
      } finally {
        await client.end().catch(() => {});
        for (const d of daemons) await d.dispose();
        if (V8_LOG && marks) reportDaemonJit(V8_LOG, logged, marks, items);
      }
    });
  } finally {
    await sim.close();
  }
}

async function main(): Promise<void> {
  const [mode, ...args] = process.argv.slice(2);
  const explainLog = process.env.DIAG_EXPLAIN;
  const server = await startPostgres({
    onLog: explainLog ? (line) => appendFileSync(explainLog, line) : HOLDS ? holdsLogSink(HOLDS_LOG) : undefined,
    durable: true,
    extraFlags: [
      ...['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.max=5000'],
      ...['-c', 'pg_stat_statements.track_planning=on', '-c', 'track_functions=all', '-c', 'track_wal_io_timing=on'],
      // The finishes' commit times, for the slot occupancy (slot-occupancy.ts).
      ...(SLOTS ? ['-c', 'track_commit_timestamp=on'] : []),
      // DIAG_TRACK_ALL=1: the statements inside functions and triggers too (foreign-key checks, plpgsql), each on its own row.
      ...(process.env.DIAG_TRACK_ALL ? ['-c', 'pg_stat_statements.track=all'] : []),
      ...(HOLDS ? HOLDS_LOG_FLAGS : []),
      // DIAG_EXPLAIN=<file>: the plan of every statement, those inside functions and triggers included (auto_explain), with
      // the rows each node read, appended to <file> — to find which statement reads an index (grep the index's name). Slows
      // the server: not for CPU figures.
      ...(explainLog
        ? [
            ...['-c', 'shared_preload_libraries=pg_stat_statements,auto_explain', '-c', 'auto_explain.log_min_duration=0'],
            ...['-c', 'auto_explain.log_nested_statements=on', '-c', 'auto_explain.log_analyze=on', '-c', 'auto_explain.log_timing=off'],
          ]
        : []),
      // DIAG_PG_FLAGS='name=value …': server settings to try (e.g. plan_cache_mode=force_generic_plan), for every session.
      ...(process.env.DIAG_PG_FLAGS ?? '')
        .split(/\s+/)
        .filter(Boolean)
        .flatMap((f) => ['-c', f]),
    ],
  });
  const admin = new pg.Client({ connectionString: server.adminUrl });
  await admin.connect();
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  try {
    if (mode === 'engine') await engine(server, server.port, admin);
    else {
      // `scale 1 3`: after the runs, the per-item counts that differ between the first and the last (per-item-counts.ts).
      const runs: PerItemCounts[] = [];
      for (const n of args.map(Number)) runs.push(await scale(server, server.port, admin, n));
      printPerItemGrowth(runs);
    }
  } finally {
    await admin.end();
    await server.stop();
    if (HOLDS && !process.env.DIAG_HOLDS_KEEP) rmSync(HOLDS_LOG, { force: true });
  }
}

await main();
