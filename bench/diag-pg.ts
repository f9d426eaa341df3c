/**
 * Diagnosis of target 9 (not part of the bench): where the CPU and the serialization go on Postgres
 * (from the pg-scale-diag branch, without its chain-head instrumentation).
 *
 *   npx tsx bench/diag-pg.ts engine          # in-process engine, instant provider: statements/xacts per item, server vs client CPU
 *   npx tsx bench/diag-pg.ts scale 1 2 3     # N real daemons, sim 200 ms: per-process CPU, wait-event samples, statements per item
 *
 * BENCH_PROFILE_DIR works as in the bench (daemon --cpu-prof; engine profile).
 */
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { createSimulator } from '../src/sim/simulator.js';
import { adminQuery, databaseUrl, startPostgres, type PostgresServer } from '../test/helpers/postgres-server.js';
import { BenchDaemon, projectFile } from './lib/daemon.js';
import { runEngineOnce } from './lib/engine-run.js';
import { sleep } from './lib/stats.js';

const TICK = 100; // clock ticks per second (/proc)

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
}

async function report(admin: pg.Client, dbName: string, items: number): Promise<void> {
  const db = await admin.query(
    `SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_returned, tup_fetched FROM pg_stat_database WHERE datname = $1`,
    [dbName],
  );
  const d = db.rows[0];
  console.log(
    `per item: xact_commit ${(d.xact_commit / items).toFixed(2)} rollback ${(d.xact_rollback / items).toFixed(3)} ins ${(d.tup_inserted / items).toFixed(1)} upd ${(d.tup_updated / items).toFixed(1)} del ${(d.tup_deleted / items).toFixed(1)}`,
  );
  const st = await admin.query(
    `SELECT s.calls, s.total_exec_time, s.total_plan_time, s.rows, left(regexp_replace(s.query, '\\s+', ' ', 'g'), 110) AS q
       FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1 ORDER BY s.calls DESC`,
    [dbName],
  );
  let calls = 0;
  let exec = 0;
  for (const r of st.rows) {
    calls += Number(r.calls);
    exec += Number(r.total_exec_time);
  }
  console.log(`statements per item: ${(calls / items).toFixed(1)}   server exec ms per item: ${(exec / items).toFixed(3)}`);
  for (const r of st.rows.slice(0, 45)) {
    console.log(`  ${(r.calls / items).toFixed(2).padStart(6)}/item ${(r.total_exec_time / r.calls).toFixed(3).padStart(7)} ms  ${r.q}`);
  }
}

/** Postgres URL through the server's Unix socket instead of TCP (DIAG_SOCKET=1). */
function viaSocket(url: string, port: number): string {
  if (!process.env.DIAG_SOCKET) return url;
  const { postmaster } = serverPids(port);
  const cmd = readFileSync(`/proc/${postmaster}/cmdline`, 'utf8').split('\0');
  const dir = cmd[cmd.indexOf('-D') + 1]!;
  const u = new URL(url);
  return `postgres://${u.username}:${u.password}@/${u.pathname.slice(1)}?host=${encodeURIComponent(dir)}&port=${port}`;
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
    const r = await runEngineOnce({
      projects: 200,
      epicsPerProject: 10,
      maxInFlight: 256,
      databaseUrl: viaSocket(url, port),
      onSeeded: async () => {
        await resetStats(admin);
        s0 = serverCpuMs(port);
        t0 = performance.now();
        trips0 = roundTrips;
      },
    });
    pg.Client.prototype.query = send;
    const trips = roundTrips - trips0;
    const serverMs = serverCpuMs(port) - s0;
    console.log(
      `engine: ${r.perSecond.toFixed(1)} items/s, round trips ${(trips / r.items).toFixed(1)}/item, client CPU ${r.cpuMicrosPerItem.toFixed(0)} µs/item (run only), server CPU (run) ${((serverMs * 1000) / r.items).toFixed(0)} µs/item, wall ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    await report(admin, dbName, r.items);
  });
}

async function scale(server: PostgresServer, port: number, admin: pg.Client, count: number): Promise<void> {
  let calls = 0;
  const sim = await createSimulator({ latencyMs: 200, onCall: () => calls++ });
  const config = { engine: { max_in_flight: 32 }, pressure: { enabled: false } };
  try {
    await withDatabase(server, async (url) => {
      const dbName = new URL(url).pathname.slice(1);
      const daemons = Array.from({ length: count }, () => BenchDaemon.inTempHome(sim.url, config, viaSocket(url, port)));
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
      try {
        for (const d of daemons) await d.start();
        const projects = Array.from({ length: 6 }, (_, p) => `p${p}`);
        for (const [i, p] of projects.entries()) await daemons[i % count]!.importProject(projectFile(p, 160));
        const items = 6 * 160;
        await resetStats(admin);
        const sim0 = process.cpuUsage();
        const d0 = daemons.map((d) => procCpuMs(d.pid));
        const s0 = serverCpuMs(port);
        const started = performance.now();
        const waits = new Map<string, number>();
        let samples = 0;
        let sampling = true;
        const sampler = (async () => {
          const sc = new pg.Client({ connectionString: url });
          await sc.connect();
          while (sampling) {
            const { rows } = await sc.query(
              `SELECT coalesce(wait_event_type,'CPU') || ':' || coalesce(wait_event,'-') || ' ' || state || ' | ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 70) AS k
                 FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle' AND backend_type = 'client backend'`,
            );
            samples++;
            for (const r of rows) waits.set(r.k, (waits.get(r.k) ?? 0) + 1);
            await sleep(25);
          }
          await sc.end();
        })();
        await Promise.all(
          projects.map((p, i) => daemons[i % count]!.client.generate.all.mutate({ project_id: p, force: false, deadline_ms: null, created_by: 'bench' })),
        );
        let applied = 0;
        while (applied < items) {
          await sleep(50);
          const { rows } = await client.query<{ n: string }>("SELECT count(*) AS n FROM llm_work_items WHERE status = 'applied'");
          applied = Number(rows[0]!.n);
        }
        const secs = (performance.now() - started) / 1000;
        sampling = false;
        await sampler;
        const dCpu = daemons.map((d, i) => procCpuMs(d.pid) - d0[i]!);
        const sCpu = serverCpuMs(port) - s0;
        const bench = process.cpuUsage(sim0);
        console.log(`\n=== ${count} daemon(s): ${(items / secs).toFixed(1)} items/s, ${secs.toFixed(1)} s, calls/item ${(calls / items).toFixed(2)}`);
        console.log(
          `CPU per item (µs): daemons ${dCpu.map((c) => ((c * 1000) / items).toFixed(0)).join(' + ')}; server ${((sCpu * 1000) / items).toFixed(0)}; bench+sim ${((bench.user + bench.system) / items).toFixed(0)}`,
        );
        console.log(
          `CPU utilisation (cores): daemons ${dCpu.map((c) => (c / 1000 / secs).toFixed(2)).join(' + ')}; server ${(sCpu / 1000 / secs).toFixed(2)}; bench+sim ${((bench.user + bench.system) / 1e6 / secs).toFixed(2)}`,
        );
        console.log(`wait-event samples (${samples} samples; average active backends per state):`);
        for (const [k, v] of [...waits.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`  ${(v / samples).toFixed(2).padStart(6)}  ${k}`);
        await report(admin, dbName, items);
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
  const server = await startPostgres({ durable: true, extraFlags: ['-c', 'shared_preload_libraries=pg_stat_statements', '-c', 'pg_stat_statements.max=5000'] });
  const admin = new pg.Client({ connectionString: server.adminUrl });
  await admin.connect();
  await admin.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  try {
    if (mode === 'engine') await engine(server, server.port, admin);
    else for (const n of args.map(Number)) await scale(server, server.port, admin, n);
  } finally {
    await admin.end();
    await server.stop();
  }
}

await main();
