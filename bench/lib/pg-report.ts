/**
 * bench/diag-pg.ts's reports from the Postgres server's own statistics: per item of a measured run, the transactions, WAL,
 * checkpoints, tables, indexes, ledger payloads, functions and statements (pg_stat_statements); the items' phases from the
 * times their writes stamped; and what bench target 9's former end poll costs the server.
 */
import pg from 'pg';
import { processCpuMicros } from './proc.js';
import { sleep } from './stats.js';
import { walByRelation } from '../../test/helpers/pg-wal.js';

/**
 * Resets the server's statistics (pg_stat_statements, the databases', WAL's, I/O's and the checkpointer's) before a measured
 * run; returns the WAL position then, where `printWalByRelation` starts reading.
 */
export async function resetStats(admin: pg.Client): Promise<string> {
  await admin.query('SELECT pg_stat_statements_reset()');
  await admin.query('SELECT pg_stat_reset()');
  await admin.query("SELECT pg_stat_reset_shared('wal')");
  await admin.query("SELECT pg_stat_reset_shared('io')");
  await admin.query("SELECT pg_stat_reset_shared('checkpointer')");
  return String((await admin.query('SELECT pg_current_wal_lsn() AS lsn')).rows[0].lsn);
}

/**
 * The measured run's WAL by relation, per item: records, bytes and, of an index, the entries written. Read
 * through a connection to the measured database (its relations' relfilenodes).
 */
export async function printWalByRelation(dbClient: pg.Client, fromLsn: string, items: number): Promise<void> {
  await dbClient.query('CREATE EXTENSION IF NOT EXISTS pg_walinspect');
  // Nothing keeps the run's WAL: a checkpoint during a long run may recycle its first segments. The report goes on without it.
  const rows = await walByRelation(dbClient, fromLsn).catch((err: unknown) => {
    console.log(`WAL by relation: not read, the WAL from the run's start is no longer there (${(err as Error).message})`);
    return null;
  });
  if (rows === null) return;
  console.log('WAL by relation (per item: records, bytes, index entries written):');
  let entries = 0;
  for (const r of rows) {
    entries += r.entries;
    if (r.records / items < 0.01) continue;
    console.log(
      `  ${r.rel.padEnd(36)} ${perItem(r.records, items).padStart(6)} ${perItem(r.bytes, items, 0).padStart(6)} ${perItem(r.entries, items).padStart(6)}`,
    );
  }
  console.log(`index entries written per item: ${perItem(entries, items)}`);
}

/** `v` per item, to `digits` decimals. */
export const perItem = (v: unknown, items: number, digits = 2): string => (Number(v) / items).toFixed(digits);

/**
 * Where an item's slot goes, median ms per applied item, from the times its writes stamped (each write's
 * clock reading when its closure ran, not its commit): its claim (`started_at`), its `prompt` entry (the
 * start), its `response` entry (the call, then the record), its `mutation_report` entry (the finish), its end; over
 * `projects`' items (the measured run's, not the warm-up's).
 */
export async function printItemPhases(client: pg.Client, projects: readonly string[]): Promise<void> {
  const entry = (type: string) =>
    `(SELECT e.created_at FROM llm_ledger_entries e WHERE e.work_item_id = w.id AND e.entry_type = '${type}' ORDER BY e.seq LIMIT 1)`;
  const median = (expr: string) => `percentile_cont(0.5) WITHIN GROUP (ORDER BY ${expr})`;
  const { rows } = await client.query(
    `SELECT ${median('prompt - w.started_at')} AS claim_start, ${median('response - prompt')} AS start_record,
            ${median('report - response')} AS record_finish, ${median('w.finished_at - w.started_at')} AS held
       FROM (SELECT w.*, ${entry('prompt')} AS prompt, ${entry('response')} AS response, ${entry('mutation_report')} AS report
               FROM llm_work_items w WHERE w.status = 'applied' AND w.project_id = ANY($1::text[])) w`,
    [projects],
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
export async function report(admin: pg.Client, dbName: string, items: number, dbClient: pg.Client): Promise<void> {
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
export async function explainBenchPoll(client: pg.Client, projects: readonly string[]): Promise<void> {
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
  const cpu0 = processCpuMicros(pid);
  for (let i = 0; i < 200; i++)
    await client.query("SELECT count(*) AS n FROM llm_work_items WHERE status = 'applied' AND project_id = ANY($1::text[])", [projects]);
  const perPoll = (processCpuMicros(pid) - cpu0) / 200; // µs
  console.log(
    `bench target 9's end poll (count of applied items): ${times[10]!.toFixed(3)} ms median of 20; ${scan}; ${buffers}; server CPU ${perPoll.toFixed(0)} µs per poll, ${(perPoll / 200).toFixed(1)} % of a core every 20 ms, ${(perPoll / 2500).toFixed(2)} % every 250 ms`,
  );
}

/** What `startWaitSampler` saw: per state, how many times a backend was seen in it, over `samples` samples. */
export interface WaitSamples {
  readonly samples: number;
  /** By `<wait event> <state> | <query's start>`. */
  readonly waits: Map<string, number>;
  /** Backends seen waiting for a lock in a write's COMMIT query (the ledger's chain head first), summed over the samples. */
  readonly commitWaits: number;
  /** What the transactions those waits were blocked by were doing, by wait event and state. */
  readonly holders: Map<string, number>;
  /** The sampler's own backend's CPU ms (the server's, not the run's). */
  readonly samplerCpuMs: number;
}

/** Samples the measured database's active client backends' wait events every 25 ms, on a connection of its own, until stopped. */
export function startWaitSampler(url: string): { stop(): Promise<WaitSamples> } {
  const waits = new Map<string, number>();
  let samples = 0;
  let commitWaits = 0;
  const holders = new Map<string, number>();
  let samplerCpuMs = 0;
  let sampling = true;
  const run = (async () => {
    const sc = new pg.Client({ connectionString: url });
    await sc.connect();
    const samplerPid = (await sc.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const samplerCpu0 = processCpuMicros(samplerPid);
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
    samplerCpuMs = (processCpuMicros(samplerPid) - samplerCpu0) / 1000;
    await sc.end();
  })();
  return {
    stop: async () => {
      sampling = false;
      await run;
      return { samples, waits, commitWaits, holders, samplerCpuMs };
    },
  };
}
