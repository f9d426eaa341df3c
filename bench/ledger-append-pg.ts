/**
 * The ledger append's server cost on Postgres alone (issue 18 target 9): one backend appends one entry per
 * transaction, as each of an item's three appends does (BEGIN; llm_ledger_append(1 entry), a prepared
 * statement as the daemon's; COMMIT), to a thread and a work item that exist. Prints per append: the
 * backend's CPU (/proc, user + system), WAL bytes and records, the time in each plpgsql function
 * (track_functions=all) and the statements run inside them (pg_stat_statements, track=all). WAL is
 * load-independent; the CPU is the one backend's own, so alternate runs of two migration folders.
 * Unlike the engine's appends, these transactions update neither the thread nor the work item, so the
 * foreign keys' key-share locks write WAL here (2 records per append).
 *
 *   npx tsx bench/ledger-append-pg.ts [appends=5000] [migrations folder=migrations/pg]
 *   LEDGER_BENCH_SETUP=<file.sql> …   # runs the file after the migrations: to try a variant of a function
 *   LEDGER_BENCH_ENTRIES=10 …         # entries per append, with target 9's payloads (below); default 1 small entry
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import pg from 'pg';
import { applyPgMigrations } from '../src/db/pg/migrate.js';
import { canonicalMetadataAroundSeq } from '../src/ledger/chain.js';
import { adminQuery, databaseUrl, startPostgres } from '../test/helpers/postgres-server.js';

const appends = Number(process.argv[2] ?? 5000);
const folder = resolve(process.argv[3] ?? 'migrations/pg');

function backendCpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return ((Number(parts[11]) + Number(parts[12])) * 1000) / 100;
}

const APPEND = `SELECT * FROM llm_ledger_append($1::text[], $2::text[], $3::text[], $4::integer[], $5::text[], $6::bigint[], $7::text[], $8::text[], $9::text[])`;

const ENTRIES = Number(process.env.LEDGER_BENCH_ENTRIES ?? 0);

/**
 * Target 9's entries per item as `diag-pg scale` measured them (2026-11-25): a prompt of 1,226 bytes, a response
 * of ~1,600–2,200 (two thirds of them past the row's TOAST threshold, so pglz-compressed to ~1,070), a mutation report
 * of 392 and a parse report of 75; JSON of words, which compresses as the simulator's stories do.
 */
const MIX: readonly [string, number][] = [
  ['prompt', 1226],
  ['response', 1600],
  ['response', 2200],
  ['mutation_report', 392],
  ['parse_report', 75],
];
const WORDS = 'the story epic user can should when acceptance criteria given then backlog project sprint value team'.split(' ');

function payloadOf(i: number, bytes: number): string {
  let text = '';
  for (let w = i; text.length < bytes - 30; w = (w * 1103515245 + 12345) % 2147483648) text += `${WORDS[w % WORDS.length]} `;
  return JSON.stringify({ n: i, text });
}

function appendParams(i: number): unknown[] {
  const n = Math.max(ENTRIES, 1);
  const cols: unknown[][] = Array.from({ length: 9 }, () => []);
  for (let k = 0; k < n; k++) {
    const [type, bytes] = ENTRIES === 0 ? ['prompt', 0] : MIX[Math.abs(i * n + k) % MIX.length]!;
    const e = { thread_id: 't-1', work_item_id: 'w-1', entry_type: type, attempt: 1, created_at: 5 };
    const payload = ENTRIES === 0 ? JSON.stringify({ n: i, text: 'x'.repeat(200) }) : payloadOf(Math.abs(i * n + k), bytes);
    const [head, tail] = canonicalMetadataAroundSeq(e);
    const digest = createHash('sha256').update(payload).update('\n').update(head).update('\n').update(tail).digest('hex');
    for (const [c, v] of [e.thread_id, e.work_item_id, e.entry_type, e.attempt, payload, e.created_at, head, tail, digest].entries()) cols[c]!.push(v);
  }
  return cols;
}

const server = await startPostgres({
  extraFlags: [
    '-c',
    'track_functions=all',
    '-c',
    'shared_preload_libraries=pg_stat_statements',
    '-c',
    'pg_stat_statements.track=all',
    '-c',
    'pg_stat_statements.track_planning=on',
  ],
});
try {
  await adminQuery(server.adminUrl, 'CREATE DATABASE ledger_bench');
  const url = databaseUrl(server.adminUrl, 'ledger_bench');
  await applyPgMigrations(url, folder);
  if (process.env.LEDGER_BENCH_SETUP) {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query(readFileSync(process.env.LEDGER_BENCH_SETUP, 'utf8'));
    await c.end();
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  client.on('error', () => {}); // the server's stop below ends the session: the error that stopped it is the one thrown
  await client.query(
    `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, idempotency_key, created_at) VALUES ('t-1', 'k', 'project', 'p', '{}', 'k1', 1)`,
  );
  await client.query(`INSERT INTO llm_work_items (id, thread_id, lock_scope, not_before, created_at) VALUES ('w-1', 't-1', 'p:1', 0, 1)`);
  for (let i = 0; i < 200; i++) await client.query({ name: 'append', text: APPEND, values: appendParams(-i) }); // warm: plans cached
  const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
  await client.query('SELECT pg_stat_reset()');
  await client.query('SELECT pg_stat_statements_reset()');
  const lsn0 = (await client.query<{ l: string }>('SELECT pg_current_wal_lsn()::text AS l')).rows[0]!.l;
  const wal0 = (await client.query<{ r: string }>('SELECT wal_records AS r FROM pg_stat_wal')).rows[0]!.r;
  const cpu0 = backendCpuMs(pid);
  const t0 = performance.now();
  for (let i = 0; i < appends; i++) {
    await client.query('BEGIN');
    await client.query({ name: 'append', text: APPEND, values: appendParams(i) });
    await client.query('COMMIT');
  }
  const wallMs = performance.now() - t0;
  const cpuMs = backendCpuMs(pid) - cpu0;
  const walBytes = (await client.query<{ b: string }>(`SELECT pg_current_wal_lsn() - '${lsn0}'::pg_lsn AS b`)).rows[0]!.b;
  await client.query('SELECT pg_stat_force_next_flush()');
  const wal1 = (await client.query<{ r: string }>('SELECT wal_records AS r FROM pg_stat_wal')).rows[0]!.r;
  console.log(`${appends} appends of ${Math.max(ENTRIES, 1)} entries, migrations ${folder}`);
  console.log(
    `per append: backend CPU ${((cpuMs * 1000) / appends).toFixed(0)} µs, wall ${((wallMs * 1000) / appends).toFixed(0)} µs, WAL ${(Number(walBytes) / appends).toFixed(0)} bytes, ${((Number(wal1) - Number(wal0)) / appends).toFixed(2)} records`,
  );
  const fns = await client.query('SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions ORDER BY total_time DESC');
  for (const f of fns.rows)
    console.log(
      `  function ${f.funcname}: ${(Number(f.calls) / appends).toFixed(2)} calls/append, ${((Number(f.total_time) * 1000) / appends).toFixed(1)} µs total, ${((Number(f.self_time) * 1000) / appends).toFixed(1)} µs self`,
    );
  const stmts = await client.query(
    `SELECT calls, plans, total_exec_time + total_plan_time AS ms, wal_records, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) AS q FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 12`,
  );
  for (const s of stmts.rows)
    console.log(
      `  ${(Number(s.calls) / appends).toFixed(2)} calls ${(Number(s.plans) / appends).toFixed(2)} plans ${((Number(s.ms) * 1000) / appends).toFixed(1)} µs ${(Number(s.wal_records) / appends).toFixed(2)} WAL records/append  ${s.q}`,
    );
  await client.end();
} finally {
  await server.stop();
}
