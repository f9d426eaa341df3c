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
 * DIAG_V8_LOG=<dir> has each daemon write V8's log of its JIT there (bench/lib/v8-log.ts) and prints TurboFan's compiles,
 * recompiles (after a deopt, or of code the GC dropped) and deopts per daemon in its start and warm-up, the projects' import,
 * the run's generate-all and the run after it, and that last window's functions and deopt sites (every window's in a file).
 * DIAG_PERF=<file> records the server's processes and the daemons' with `perf` (DIAG_PERF_CALLGRAPH=1: dwarf call graphs, for
 * bench/perf-summary.mjs; DIAG_PERF_CALLGRAPH=fp: frame pointers, which V8's JIT code keeps: with
 * BENCH_DAEMON_FLAGS='--perf-basic-prof-only-functions --interpreted-frames-native-stack', bench/perf-daemons.mjs
 * splits the daemons' CPU by owner: pg driver, provider call, the engine's JavaScript, GC, event loop, TurboFan).
 * `scale 1 3` ends with the per-item counts (transactions, rows written per table, calls and rows per statement) that differ
 * between the first run and the last (bench/lib/per-item-counts.ts): what grows with the number of daemons.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import pg from 'pg';
import { createSimulator } from '../src/sim/simulator.js';
import { adminQuery, databaseUrl, startPostgres, type PostgresServer } from '../test/helpers/postgres-server.js';
import { BenchDaemon, projectFile } from './lib/daemon.js';
import { HOLDS_LOG_FLAGS, holdsLogSink, printHeadHolds, startHoldsLog, stopHoldsLog } from './lib/head-holds.js';
import { runEngineOnce } from './lib/engine-run.js';
import { printPerItemGrowth, printPerItemTotals, readPerItemCounts, type PerItemCounts } from './lib/per-item-counts.js';
import { sleep } from './lib/stats.js';
import { countJit, printJit, v8LogFlags } from './lib/v8-log.js';

const TICK = 100; // clock ticks per second (/proc)
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
/** DIAG_V8_LOG=<dir>: each daemon's V8 log of its JIT, read for TurboFan's compiles and deopts (see the file's comment). */
const V8_LOG = process.env.DIAG_V8_LOG;

function procCpuMs(pid: number, withChildren = false): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
    // fields after comm: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    const t = Number(parts[11]) + Number(parts[12]) + (withChildren ? Number(parts[13]) + Number(parts[14]) : 0);
    return (t * 1000) / TICK;
  } catch {
    return 0;
  }
}

/**
 * What a daemon's thread is, by its name (`/proc/<pid>/task/<tid>/comm`) or, where node leaves it unnamed (node 20 names
 * none: every thread is "node"), by the order node 20 starts them in (tids ascending): the main thread (the JS thread:
 * the event loop, the JIT's main-thread work, the GC's main-thread pauses), the platform's delayed-task scheduler, V8's
 * `--v8-pool-size` (4) platform workers (concurrent compilation, concurrent marking, parallel scavenges: a `perf record`
 * of them shows which), the inspector's signal thread, then libuv's pool (fs, DNS, crypto), started at its first use.
 */
function threadKind(index: number, comm: string, v8Pool: number): string {
  if (index === 0) return 'main';
  if (comm !== 'node') return comm;
  if (index === 1) return 'delayed-task scheduler';
  if (index <= 1 + v8Pool) return 'V8 workers';
  if (index === 2 + v8Pool) return 'inspector signal';
  return 'libuv pool';
}

/** A process's CPU ms so far: its main thread, its other threads (V8's, libuv's), and by threadKind. */
function threadCpuMs(pid: number): { main: number; other: number; byName: Map<string, number> } {
  let main = 0;
  let other = 0;
  const byName = new Map<string, number>();
  try {
    const pool = /--v8-pool-size=(\d+)/.exec(readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' '));
    const tids = readdirSync(`/proc/${pid}/task`)
      .map(Number)
      .sort((a, b) => a - b);
    for (const [i, tid] of tids.entries()) {
      const f = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
      const ms = ((Number(parts[11]) + Number(parts[12])) * 1000) / TICK;
      const name = threadKind(i, f.slice(f.indexOf('(') + 1, f.lastIndexOf(')')), pool ? Number(pool[1]) : 4);
      byName.set(name, (byName.get(name) ?? 0) + ms);
      if (tid === pid) main += ms;
      else other += ms;
    }
  } catch {
    /* gone */
  }
  return { main, other, byName };
}

/**
 * CPU ms by thread name between two readings, summed over processes. A thread that ended between them is not
 * counted (its CPU is in neither reading of /proc/<pid>/task): V8's and libuv's threads live as long as the process.
 */
function threadCpuDelta(before: ReturnType<typeof threadCpuMs>[], after: ReturnType<typeof threadCpuMs>[]): Map<string, number> {
  const sum = new Map<string, number>();
  for (const [i, a] of after.entries()) for (const [name, ms] of a.byName) sum.set(name, (sum.get(name) ?? 0) + ms - (before[i]!.byName.get(name) ?? 0));
  return sum;
}

/** The postmaster of the server on `port` and its live children. */
function serverPids(port: number): { postmaster: number; children: number[] } {
  let postmaster = 0;
  const byParent = new Map<number, number[]>();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const pid = Number(d);
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      byParent.set(ppid, [...(byParent.get(ppid) ?? []), pid]);
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8');
      if (cmd.includes(`${port}`) && cmd.includes('postgres') && cmd.includes('-D')) postmaster = pid;
    } catch {
      /* gone */
    }
  }
  return { postmaster, children: byParent.get(postmaster) ?? [] };
}

/** Server CPU ms so far: the postmaster, its reaped children, and its live children. */
function serverCpuMs(port: number): number {
  const { postmaster, children } = serverPids(port);
  return procCpuMs(postmaster, true) + children.reduce((a, p) => a + procCpuMs(p), 0);
}

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

async function resetStats(admin: pg.Client): Promise<void> {
  await admin.query('SELECT pg_stat_statements_reset()');
  await admin.query('SELECT pg_stat_reset()');
  await admin.query("SELECT pg_stat_reset_shared('wal')");
  await admin.query("SELECT pg_stat_reset_shared('io')");
  await admin.query("SELECT pg_stat_reset_shared('checkpointer')");
}

const perItem = (v: unknown, items: number, digits = 2): string => (Number(v) / items).toFixed(digits);

/**
 * Where an item's slot goes, median ms per applied item, from the times its writes stamped (each write's
 * clock reading when its closure ran, not its commit): its claim (`started_at`), its `prompt` entry (the
 * start), its `response` entry (the call, then the record), its `mutation_report` entry (the finish), its end.
 */
async function printItemPhases(client: pg.Client): Promise<void> {
  const entry = (type: string) =>
    `(SELECT e.created_at FROM llm_ledger_entries e WHERE e.work_item_id = w.id AND e.entry_type = '${type}' ORDER BY e.seq LIMIT 1)`;
  const median = (expr: string) => `percentile_cont(0.5) WITHIN GROUP (ORDER BY ${expr})`;
  const { rows } = await client.query(
    `SELECT ${median('prompt - w.started_at')} AS claim_start, ${median('response - prompt')} AS start_record,
            ${median('report - response')} AS record_finish, ${median('w.finished_at - w.started_at')} AS held
       FROM (SELECT w.*, ${entry('prompt')} AS prompt, ${entry('response')} AS response, ${entry('mutation_report')} AS report
               FROM llm_work_items w WHERE w.status = 'applied') w`,
  );
  const r = rows[0] as Record<string, number>;
  console.log(
    `item phases, median ms: claim → start ${r.claim_start}, start → record ${r.start_record}, record → finish ${r.record_finish}; claim → applied ${r.held}`,
  );
}

/**
 * Server-side facts per item: transactions, WAL, checkpoints, autovacuum, trigger time, and every statement
 * by server time (execution + planning), with calls, rows and shared blocks (pg_stat_statements).
 */
async function report(admin: pg.Client, dbName: string, items: number, dbClient: pg.Client): Promise<void> {
  const db = await admin.query(
    `SELECT sessions, xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_returned, tup_fetched FROM pg_stat_database WHERE datname = $1`,
    [dbName],
  );
  const d = db.rows[0];
  console.log(
    `sessions ${d.sessions}; per item: xact_commit ${perItem(d.xact_commit, items)} rollback ${perItem(d.xact_rollback, items, 3)} ins ${perItem(d.tup_inserted, items, 1)} upd ${perItem(d.tup_updated, items, 1)} del ${perItem(d.tup_deleted, items, 1)} returned ${perItem(d.tup_returned, items, 0)} fetched ${perItem(d.tup_fetched, items, 0)}`,
  );
  // Postgres 18: WAL writes and fsyncs are in pg_stat_io (object 'wal'), checkpoints in pg_stat_checkpointer.
  const wal = (await admin.query('SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal')).rows[0];
  const walIo = (await admin.query("SELECT sum(writes) AS writes, sum(fsyncs) AS fsyncs, sum(fsync_time) AS fsync_ms FROM pg_stat_io WHERE object = 'wal'"))
    .rows[0];
  console.log(
    `per item: WAL records ${perItem(wal.wal_records, items, 1)} full-page images ${perItem(wal.wal_fpi, items, 2)} bytes ${perItem(wal.wal_bytes, items, 0)} writes ${perItem(walIo.writes, items, 2)} fsyncs ${perItem(walIo.fsyncs, items, 2)} (${perItem(walIo.fsync_ms, items, 3)} ms)`,
  );
  const cp = (await admin.query('SELECT num_timed, num_requested, buffers_written FROM pg_stat_checkpointer')).rows[0];
  console.log(`checkpoints ${Number(cp.num_timed) + Number(cp.num_requested)}, buffers they wrote ${cp.buffers_written}`);
  // Per-database views: read through a connection to the measured database.
  const tables = await dbClient.query(
    `SELECT relname, seq_scan, seq_tup_read, idx_scan, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, autovacuum_count, autoanalyze_count, n_live_tup, n_dead_tup
       FROM pg_stat_user_tables WHERE seq_scan + coalesce(idx_scan, 0) + n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC`,
  );
  console.log('tables (per item: seq scans, rows they read, index scans, ins, upd (HOT), del; autovacuum/analyze runs; live/dead rows):');
  for (const t of tables.rows) {
    console.log(
      `  ${String(t.relname).padEnd(26)} seq ${perItem(t.seq_scan, items)} (${perItem(t.seq_tup_read, items, 1)} rows) idx ${perItem(t.idx_scan, items, 1)} ins ${perItem(t.n_tup_ins, items)} upd ${perItem(t.n_tup_upd, items)} (${perItem(t.n_tup_hot_upd, items)}) del ${perItem(t.n_tup_del, items)}; vac ${t.autovacuum_count}/${t.autoanalyze_count}; ${t.n_live_tup}/${t.n_dead_tup}`,
    );
  }
  // Which indexes the run read (an index no statement reads is upkeep on every insert and non-HOT update for nothing).
  const indexes = await dbClient.query(
    `SELECT relname, indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes
      WHERE relname IN ('llm_work_items', 'llm_threads', 'llm_ledger_entries', 'llm_charges', 'mutations', 'document_parts', 'locks')
      ORDER BY relname, idx_scan DESC`,
  );
  console.log('indexes (per item: scans, entries read):');
  for (const i of indexes.rows)
    console.log(`  ${String(i.relname).padEnd(20)} ${String(i.indexrelname).padEnd(36)} ${perItem(i.idx_scan, items)} ${perItem(i.idx_tup_read, items, 1)}`);
  // The ledger's payloads: their size, what the row stores (pg_column_size) and whether TOAST compressed them (pglz: the
  // server's CPU inside the append, under the chain head, for any row past toast_tuple_target).
  const payloads = await dbClient.query(
    `SELECT entry_type, count(*) AS n, avg(octet_length(payload))::int AS bytes, max(octet_length(payload)) AS max_bytes,
            avg(pg_column_size(payload))::int AS stored, count(*) FILTER (WHERE pg_column_compression(payload) IS NOT NULL) AS compressed
       FROM llm_ledger_entries GROUP BY entry_type ORDER BY count(*) DESC`,
  );
  console.log('ledger payloads (every entry, the warm-up included: entries, mean and max bytes, mean bytes stored, entries compressed):');
  for (const r of payloads.rows) console.log(`  ${String(r.entry_type).padEnd(18)} ${r.n} ${r.bytes} ${r.max_bytes} ${r.stored} ${r.compressed}`);
  const fns = await dbClient.query('SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions ORDER BY total_time DESC');
  for (const f of fns.rows)
    console.log(
      `  function ${f.funcname}: ${perItem(f.calls, items)}/item, ${(Number(f.total_time) / items).toFixed(3)} ms/item (self ${(Number(f.self_time) / items).toFixed(3)})`,
    );
  const st = await admin.query(
    `SELECT s.calls, s.total_exec_time, s.total_plan_time, s.plans, s.rows, s.shared_blks_hit, s.shared_blks_read, s.shared_blks_dirtied, s.wal_records,
            left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110) AS q
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY s.total_exec_time + s.total_plan_time DESC`,
    [dbName],
  );
  let calls = 0;
  let exec = 0;
  let plan = 0;
  let plans = 0;
  for (const r of st.rows) {
    calls += Number(r.calls);
    exec += Number(r.total_exec_time);
    plan += Number(r.total_plan_time);
    plans += Number(r.plans);
  }
  console.log(
    `statements per item: ${(calls / items).toFixed(1)}   server exec ms per item: ${(exec / items).toFixed(3)}   plan ms per item: ${(plan / items).toFixed(3)} (${(plans / items).toFixed(1)} plans)`,
  );
  // Planning paid per execution: a prepared statement whose generic plan the server does not choose is planned on every run.
  const planned = [...st.rows].sort((a, b) => Number(b.total_plan_time) - Number(a.total_plan_time)).slice(0, 8);
  console.log('statements by planning time: calls/item, plans per call, plan ms per item, ms per plan, query');
  for (const r of planned)
    console.log(
      `  ${perItem(r.calls, items)} ${(Number(r.plans) / Math.max(Number(r.calls), 1)).toFixed(2)} ${(Number(r.total_plan_time) / items).toFixed(3)} ${(Number(r.total_plan_time) / Math.max(Number(r.plans), 1)).toFixed(3)}  ${r.q}`,
    );
  console.log('  calls/item  exec+plan ms/item  (exec ms/call, plans/item)  rows/call  blocks hit/read/dirtied per call  WAL records/item  query');
  for (const r of st.rows.slice(0, Number(process.env.DIAG_STATEMENTS ?? 45))) {
    const c = Number(r.calls);
    console.log(
      `  ${(c / items).toFixed(2).padStart(6)} ${((Number(r.total_exec_time) + Number(r.total_plan_time)) / items).toFixed(3).padStart(7)} (${(r.total_exec_time / c).toFixed(3)}, ${perItem(r.plans, items)}) ${(r.rows / c).toFixed(1).padStart(6)}  ${(r.shared_blks_hit / c).toFixed(1)}/${(r.shared_blks_read / c).toFixed(1)}/${(r.shared_blks_dirtied / c).toFixed(1)}  ${perItem(r.wal_records, items)}  ${r.q}`,
    );
  }
}

/**
 * What bench target 9's poll for the run's end costs the server on this populated database (its statement, as
 * bench/targets/postgres.ts ran it every 20 ms until 2026-11-26): the median of 20 runs' execution time, and buffers.
 */
async function explainBenchPoll(client: pg.Client, projects: readonly string[]): Promise<void> {
  const times: number[] = [];
  let buffers = '';
  let scan = '';
  for (let i = 0; i < 20; i++) {
    const { rows } = await client.query<{ 'QUERY PLAN': string }>(
      "EXPLAIN (ANALYZE, BUFFERS) SELECT count(*) AS n FROM llm_work_items WHERE status = 'applied' AND project_id = ANY($1::text[])",
      [projects],
    );
    const lines = rows.map((r) => r['QUERY PLAN']);
    times.push(Number(/Execution Time: ([\d.]+)/.exec(lines.join('\n'))?.[1] ?? NaN));
    buffers = lines.find((l) => l.includes('Buffers:'))?.trim() ?? '';
    scan = lines.find((l) => l.includes('Scan'))?.trim() ?? '';
  }
  times.sort((a, b) => a - b);
  // The server's CPU per poll, from its backend's /proc counters (load-independent, unlike the times above): 200 polls.
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const cpu0 = procCpuMs(pid);
  for (let i = 0; i < 200; i++)
    await client.query("SELECT count(*) AS n FROM llm_work_items WHERE status = 'applied' AND project_id = ANY($1::text[])", [projects]);
  const perPoll = (procCpuMs(pid) - cpu0) / 200;
  console.log(
    `bench target 9's end poll (count of applied items): ${times[10]!.toFixed(3)} ms median of 20; ${scan}; ${buffers}; server CPU ${(perPoll * 1000).toFixed(0)} µs per poll, ${(perPoll * 5).toFixed(1)} % of a core every 20 ms, ${(perPoll / 2.5).toFixed(2)} % every 250 ms`,
  );
}

/**
 * DIAG_PERF=<file>: a `perf record` of the server's processes and the daemons over the measured phase only (not the server's start, the
 * migrations or the seed), to read the server's own functions: `perf report -i <file> --comm postgres --sort sym`.
 */
function startPerf(port: number, daemonPids: number[] = []): ChildProcess | undefined {
  const out = process.env.DIAG_PERF;
  if (!out) return undefined;
  // The server's processes (new backends are forked by the postmaster: inherited) and our daemons only —
  // other servers on the machine are not ours to count.
  const { postmaster, children } = serverPids(port);
  const pids = [postmaster, ...children, ...daemonPids].join(',');
  return spawn(
    'perf',
    [
      'record',
      '-p',
      pids,
      '-F',
      process.env.DIAG_PERF_FREQ ?? '999',
      '-o',
      out,
      ...(process.env.DIAG_PERF_CALLGRAPH ? ['--call-graph', process.env.DIAG_PERF_CALLGRAPH === 'fp' ? 'fp' : 'dwarf,16384'] : []),
    ],
    {
      stdio: 'ignore',
    },
  );
}

async function stopPerf(perf: ChildProcess | undefined): Promise<void> {
  if (!perf) return;
  const done = new Promise((resolve) => perf.once('exit', resolve));
  perf.kill('SIGINT');
  await done;
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
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      try {
        for (const d of daemons) await d.start(V8_LOG ? v8LogFlags(V8_LOG) : []);
        // DIAG_SETUP_SQL=<file>: run once the daemons have migrated the database (to try a variant of a function).
        if (process.env.DIAG_SETUP_SQL) await client.query(readFileSync(process.env.DIAG_SETUP_SQL, 'utf8'));
        const warmUpItems = WARMUP_EPICS > 0 ? await warmUp(daemons, client) : 0;
        const warmedWall = Date.now();
        calls = 0;
        const projects = Array.from({ length: PROJECTS }, (_, p) => `p${p}`);
        for (const [i, p] of projects.entries()) await daemons[i % count]!.importProject(projectFile(p, EPICS));
        const items = PROJECTS * EPICS;
        await resetStats(admin);
        // pg_stat_reset() resets the counters of the database it runs in: the measured one's tables and functions too.
        await client.query('SELECT pg_stat_reset()');
        if (HOLDS) await startHoldsLog(admin, HOLDS_LOG);
        const perf = startPerf(
          port,
          daemons.map((d) => d.pid),
        );
        const sim0 = process.cpuUsage();
        const d0 = daemons.map((d) => procCpuMs(d.pid));
        const t0 = daemons.map((d) => threadCpuMs(d.pid));
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
        const waits = new Map<string, number>();
        let samples = 0;
        let commitWaits = 0;
        const holders = new Map<string, number>();
        let sampling = true;
        // This tool's own backends (the sampler's, the poll's, the notification counter's) are the server's processes
        // too: their CPU is left out of the server's per item, and shown apart.
        let samplerCpu = 0;
        const clientPid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        const clientCpu0 = procCpuMs(clientPid);
        const notesCpu0 = procCpuMs(notes.pid);
        const sampler = (async () => {
          const sc = new pg.Client({ connectionString: url });
          await sc.connect();
          const samplerPid = (await sc.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
          const samplerCpu0 = procCpuMs(samplerPid);
          while (sampling) {
            const { rows } = await sc.query(
              // An EXECUTE's literals are cut (one key per statement, not per call). `at_commit`: a lock wait in a
              // write's COMMIT query (db/pg/commit-query.ts: its statements' names end in `_c`), whose first lock
              // is the ledger's chain head (the text is cut at track_activity_query_size: its end is not seen).
              `SELECT coalesce(wait_event_type,'CPU') || ':' || coalesce(wait_event,'-') || ' ' || state || ' | ' ||
                      left(regexp_replace(regexp_replace(query, '\\s+', ' ', 'g'), '(EXECUTE \\w+)\\(.*$', '\\1(…)'), 70) AS k,
                      (wait_event_type = 'Lock' AND query ~ '^(BEGIN;\\s*)?(PREPARE|EXECUTE) \\w+_c\\M') AS at_commit, pid
                 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' AND backend_type = 'client backend'`,
            );
            samples++;
            const waiting: number[] = [];
            for (const r of rows) {
              waits.set(r.k, (waits.get(r.k) ?? 0) + 1);
              if (r.at_commit) {
                commitWaits++;
                waiting.push(r.pid);
              }
            }
            // What the transaction that a COMMIT query's lock wait is blocked by is doing meanwhile (the chain head's holder,
            // mostly): its wait event, read in a second query (a few ms later at most, so a fast holder may have moved on).
            if (waiting.length > 0) {
              const held = await sc.query(
                `SELECT coalesce(h.wait_event_type, 'CPU') || ':' || coalesce(h.wait_event, '-') || ' ' || h.state AS k
                   FROM unnest($1::int[]) AS w(pid) CROSS JOIN LATERAL unnest(pg_blocking_pids(w.pid)) AS b(pid) JOIN pg_stat_activity h ON h.pid = b.pid`,
                [waiting],
              );
              for (const r of held.rows) holders.set(r.k, (holders.get(r.k) ?? 0) + 1);
            }
            await sleep(25);
          }
          samplerCpu = procCpuMs(samplerPid) - samplerCpu0;
          await sc.end();
        })();
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
        sampling = false;
        await sampler;
        const dCpu = daemons.map((d, i) => procCpuMs(d.pid) - d0[i]!);
        const t1 = daemons.map((d) => threadCpuMs(d.pid));
        const dThreads = t1.map((t, i) => ({ main: t.main - t0[i]!.main, other: t.other - t0[i]!.other }));
        const byName = threadCpuDelta(t0, t1);
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
          `daemon CPU per item by thread (µs): main ${dThreads.map((t) => ((t.main * 1000) / items).toFixed(0)).join(' + ')}; other threads (V8 compilers, GC helpers, libuv) ${dThreads.map((t) => ((t.other * 1000) / items).toFixed(0)).join(' + ')}`,
        );
        console.log(
          `daemons' CPU per item by thread name (µs, summed over the daemons): ${[...byName.entries()]
            .sort((a, b) => b[1] - a[1])
            .map(([name, ms]) => `${name} ${((ms * 1000) / items).toFixed(0)}`)
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
        await printItemPhases(client);
        if (V8_LOG) {
          const windows = (d: BenchDaemon) => [
            { fromMs: 0, toMs: warmedWall - d.spawnedAt },
            { fromMs: warmedWall - d.spawnedAt, toMs: startedWall - d.spawnedAt },
            { fromMs: startedWall - d.spawnedAt, toMs: queuedWall - d.spawnedAt },
            { fromMs: queuedWall - d.spawnedAt, toMs: endedWall - d.spawnedAt },
          ];
          const counts = daemons.map((d) => countJit(`${V8_LOG}/v8-${d.pid}.log`, windows(d)));
          printJit(['start and warm-up', "the run's projects' import", "the run's generate-all", 'the run after it'], counts, items, `${V8_LOG}/jit-lists.txt`);
        }
        if (HOLDS) {
          await stopHoldsLog(admin);
          printHeadHolds(HOLDS_LOG, items, secs * 1000);
        }
        console.log(`wait-event samples (${samples} samples; average active backends per state):`);
        for (const [k, v] of [...waits.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${(v / samples).toFixed(2).padStart(6)}  ${k}`);
        await report(admin, dbName, items, client);
        // Read before the bench poll's EXPLAIN, whose statements are not the daemons' work.
        const counts = await readPerItemCounts(admin, dbName, client, items, count);
        printPerItemTotals(counts);
        await explainBenchPoll(client, projects);
        return counts;
      } finally {
        await client.end().catch(() => {});
        for (const d of daemons) await d.dispose();
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
