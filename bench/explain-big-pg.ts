/**
 * The plans of the statements whose indexes changed (issue 18 target 9), on Postgres at bench target 5/7's size:
 * 1,000,000 closed threads (95 % complete, 5 % failed; 500,000 request keys, two threads each) with an applied work
 * item each, ANALYZEd. Each statement runs as the daemon runs it (its db/ function on PgSql: a prepared
 * statement), under a generic plan and under a custom one (`plan_cache_mode`), and auto_explain prints the plan
 * it ran with (ANALYZE, BUFFERS).
 *
 *   npx tsx bench/explain-big-pg.ts          # EXPLAIN_THREADS=<n> to size it
 */
import { openPostgresPool } from '../src/db/pg/connection.js';
import { applyPgMigrations } from '../src/db/pg/migrate.js';
import { PgSql } from '../src/db/pg/sql.js';
import { listPrunableRoots } from '../src/db/retention.js';
import { findLatestCompleteThreadByKey, latestCompleteThreadsByKeys } from '../src/db/threads.js';
import { lockWorkItemsWithThreads } from '../src/db/item-with-thread.js';
import { adminQuery, databaseUrl, startPostgres } from '../test/helpers/postgres-server.js';

const THREADS = Number(process.env.EXPLAIN_THREADS ?? 1_000_000);

/** auto_explain's lines, printed while `printing` (not the fill's). */
let printing = false;
const server = await startPostgres({
  extraFlags: [
    ...['-c', 'shared_preload_libraries=auto_explain', '-c', 'auto_explain.log_min_duration=0', '-c', 'auto_explain.log_analyze=on'],
    ...['-c', 'auto_explain.log_buffers=on', '-c', 'auto_explain.log_timing=off', '-c', 'auto_explain.log_nested_statements=on'],
  ],
  onLog: (line) => {
    if (printing && !/^\s*$/.test(line)) console.log(`  ${line.replace(/^.*LOG:\s+/, '')}`);
  },
});
await adminQuery(server.adminUrl, 'CREATE DATABASE big');
const url = databaseUrl(server.adminUrl, 'big');
await applyPgMigrations(url);
/** A pool whose idle connection the server's stop ends (57P01) without an unhandled error. */
const openPool = () =>
  openPostgresPool(url, { max: 1 }).on('error', (err: Error & { code?: string }) => {
    if (err.code !== '57P01') throw err;
  });
const fill = openPool();
const filler = new PgSql(fill);
try {
  const t0 = Date.now();
  await filler.run(
    `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, idempotency_key, created_at, closed_at)
     SELECT 't' || lpad(i::text, 8, '0'), 'generate', 'project', 'p' || (i % 20), 'doc', CASE WHEN i % 20 = 0 THEN 'failed' ELSE 'complete' END,
            'k' || (i % (CAST(@n AS int) / 2)), i, i + 1
       FROM generate_series(1, CAST(@n AS int)) i`,
    { n: THREADS },
  );
  await filler.run(
    `INSERT INTO llm_work_items (id, thread_id, status, lock_scope, project_id, not_before, created_at, finished_at)
     SELECT 'w' || lpad(i::text, 8, '0'), 't' || lpad(i::text, 8, '0'), 'applied', 'doc', 'p' || (i % 20), i, i, i + 1
       FROM generate_series(1, CAST(@n AS int)) i`,
    { n: THREADS },
  );
  await filler.run('ANALYZE');
  console.log(`${THREADS} closed threads with an applied item each in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  const keys = Array.from({ length: 160 }, (_, i) => `k${i * 997}`);
  const items = Array.from({ length: 4 }, (_, i) => `w${String(1000 + i * 7919).padStart(8, '0')}`);
  const runs = (sql: PgSql): [string, () => Promise<unknown>][] => [
    ["a request's newest complete thread (findLatestCompleteThreadByKey)", () => findLatestCompleteThreadByKey(sql, 'k4242')],
    ["160 requests' newest complete threads (latestCompleteThreadsByKeys)", () => latestCompleteThreadsByKeys(sql, keys)],
    ['4 items with their threads, locked (lockWorkItemsWithThreads, record)', () => lockWorkItemsWithThreads(sql, items, 'record')],
    ['retention: 100 prunable roots closed before the 500,000th (listPrunableRoots)', () => listPrunableRoots(sql, THREADS / 2, 100)],
  ];
  for (const mode of ['force_generic_plan', 'force_custom_plan']) {
    // A new connection per mode (the database's setting), so each prepares its statements under that mode.
    await filler.run(`ALTER DATABASE big SET plan_cache_mode = ${mode}`);
    const pool = openPool();
    for (const [what, run] of runs(new PgSql(pool))) {
      console.log(`\n${what}, ${mode}:`);
      printing = true;
      const s = Date.now();
      await run();
      const wall = Date.now() - s;
      // auto_explain logs as the statement ends; the server's log reaches us a moment later.
      await new Promise((r) => setTimeout(r, 300));
      printing = false;
      // The call's round trip as the client saw it; the statement's own time is auto_explain's, above.
      console.log(`  (client wall ${wall} ms)`);
    }
    await pool.end();
  }
} finally {
  await fill.end();
  await server.stop();
}
