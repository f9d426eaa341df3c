/**
 * The queue-depth bookkeeping's server cost on Postgres alone (issue 18 target 9): one backend runs an item's
 * life on llm_work_items as the daemons do, phase by phase, on databases migrated by two migration folders
 * (alternated, on one server): enqueue (`rows` items, one INSERT each in one transaction, as generate-all's
 * children; or one multi-row INSERT with `BULK=1`), claim (UPDATE … status 'claimed' of 32 rows per
 * statement), start and finish (one UPDATE per item, queued-ness unchanged). Prints per item and phase the
 * backend's CPU (/proc, user + system) and, per folder, the time in each plpgsql function (track_functions).
 *
 *   npx tsx bench/queue-depth-pg.ts <migrations folder A> <migrations folder B> [items per round=480] [rounds=20]
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import pg from 'pg';
import { applyPgMigrations } from '../src/db/pg/migrate.js';
import { adminQuery, databaseUrl, startPostgres } from '../test/helpers/postgres-server.js';

const folders = [resolve(process.argv[2] ?? 'migrations/pg'), resolve(process.argv[3] ?? 'migrations/pg')];
const items = Number(process.argv[4] ?? 480);
const rounds = Number(process.argv[5] ?? 20);
const bulk = process.env.BULK === '1';
const CLAIM = 32;
const PHASES = ['enqueue', 'claim', 'start', 'finish'] as const;
type Phase = (typeof PHASES)[number];

function backendCpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const parts = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return ((Number(parts[11]) + Number(parts[12])) * 1000) / 100;
}

const INSERT = `INSERT INTO llm_work_items (id, thread_id, sequence, status, lock_scope, project_id, not_before, created_at)
  VALUES ($1, 't-1', $2, 'queued', $1, 'p', 0, 1)`;

/** One round's phases on `client`; adds each phase's backend CPU ms to `cpu`. */
async function round(client: pg.Client, pid: number, r: number, cpu: Record<Phase, number>): Promise<void> {
  const ids = Array.from({ length: items }, (_, i) => `w-${r}-${i}`);
  const timed = async (phase: Phase, run: () => Promise<void>) => {
    const c0 = backendCpuMs(pid);
    await run();
    cpu[phase] += backendCpuMs(pid) - c0;
  };
  await timed('enqueue', async () => {
    await client.query('BEGIN');
    if (bulk) {
      await client.query(
        `INSERT INTO llm_work_items (id, thread_id, sequence, status, lock_scope, project_id, not_before, created_at)
         SELECT id, 't-1', $2::integer + ord, 'queued', id, 'p', 0, 1 FROM unnest($1::text[]) WITH ORDINALITY AS x(id, ord)`,
        [ids, r * items],
      );
    } else {
      for (const [i, id] of ids.entries()) await client.query({ name: 'insert', text: INSERT, values: [id, r * items + i + 1] });
    }
    await client.query('COMMIT');
  });
  await timed('claim', async () => {
    for (let i = 0; i < items; i += CLAIM) {
      await client.query({
        name: 'claim',
        text: `UPDATE llm_work_items SET status = 'claimed', lease_owner = 'd' WHERE id IN (
                 SELECT id FROM llm_work_items WHERE status = 'queued' ORDER BY priority, not_before LIMIT ${CLAIM} FOR UPDATE SKIP LOCKED)`,
      });
    }
  });
  await timed('start', async () => {
    for (const id of ids)
      await client.query({ name: 'start', text: `UPDATE llm_work_items SET status = 'running', started_at = 2 WHERE id = $1`, values: [id] });
  });
  await timed('finish', async () => {
    for (const id of ids)
      await client.query({ name: 'finish', text: `UPDATE llm_work_items SET status = 'applied', finished_at = 3 WHERE id = $1`, values: [id] });
  });
}

const server = await startPostgres({ extraFlags: ['-c', 'track_functions=all'] });
try {
  const dbs: { client: pg.Client; pid: number; cpu: Record<Phase, number> }[] = [];
  for (const [n, folder] of folders.entries()) {
    await adminQuery(server.adminUrl, `CREATE DATABASE depth_bench_${n}`);
    const url = databaseUrl(server.adminUrl, `depth_bench_${n}`);
    await applyPgMigrations(url, folder);
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    client.on('error', () => {}); // the server's stop ends the session; an error before it is thrown by its query
    await client.query(
      `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, idempotency_key, created_at) VALUES ('t-1', 'k', 'project', 'p', '{}', 'k1', 1)`,
    );
    const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
    const cpu = { enqueue: 0, claim: 0, start: 0, finish: 0 };
    await round(client, pid, -1, cpu); // warm: plans cached
    await client.query('DELETE FROM llm_work_items');
    await client.query('SELECT pg_stat_force_next_flush()');
    await client.query('SELECT 1'); // the warm round's counts flushed before the reset, not after it
    await client.query('SELECT pg_stat_reset()');
    dbs.push({ client, pid, cpu: { enqueue: 0, claim: 0, start: 0, finish: 0 } });
  }
  // Alternate the folders round by round: both see the same machine load.
  for (let r = 0; r < rounds; r++) for (const db of dbs) await round(db.client, db.pid, r, db.cpu);
  const total = items * rounds;
  for (const [n, db] of dbs.entries()) {
    const depth = (await db.client.query('SELECT sum(queued)::int AS d FROM llm_queue_depth')).rows[0].d;
    const per = PHASES.map((p) => `${p} ${((db.cpu[p] * 1000) / total).toFixed(1)}`).join(', ');
    const sum = PHASES.reduce((s, p) => s + db.cpu[p], 0);
    console.log(
      `${folders[n]} (${bulk ? 'one multi-row INSERT' : 'one INSERT per item'}): backend CPU per item (µs): ${per}; all ${((sum * 1000) / total).toFixed(1)}; depth at the end ${depth}`,
    );
    await db.client.query('SELECT pg_stat_force_next_flush()');
    const fns = await db.client.query('SELECT funcname, calls, total_time FROM pg_stat_user_functions ORDER BY total_time DESC');
    for (const f of fns.rows)
      console.log(
        `  function ${f.funcname}: ${(Number(f.calls) / total).toFixed(3)} calls/item, ${((Number(f.total_time) * 1000) / total).toFixed(1)} µs/item`,
      );
    await db.client.end();
  }
} finally {
  await server.stop();
}
