/**
 * Target 5: a database holding 1,000,000 closed threads (and their applied work items) against an
 * empty one. The big one is generated with SQL in one transaction (a bench set-up step, not through
 * the daemon). Per run and per database: K new items are enqueued, a fresh engine claims them all
 * against a provider that never answers (claims/s, claim → prompt entry → call started), then
 * `threads --active` is timed in process while those K threads are active. The run ends by marking
 * the K items done with SQL, so every run starts from the same state.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Sql } from '../../src/core/sql.js';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { projectFile } from '../lib/daemon.js';
import { hangingProvider } from '../lib/engine-run.js';
import { quantile, row, type Row } from '../lib/stats.js';

const CLOSED_THREADS = Number(process.env.BENCH_SCALE_THREADS ?? 1_000_000);
const K = 1000;
const QUERIES = 200;

export function appFor(home: string, maxInFlight: number): App {
  const config = { ...loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9/v1', OPENAI_API_KEY: 'bench' }), maxInFlight };
  return new App({ config, logger: createLogger(null, 'silent'), provider: hangingProvider() });
}

/** Fills the database with `n` complete single-epic threads, each with one applied work item. */
export function fillClosedThreads(home: string, n: number): void {
  const app = appFor(home, 1); // runs the migrations
  const db = app.db;
  const statements = closedThreadsFill('sqlite');
  const params = closedThreadsFillParams(n);
  db.transaction(() => {
    db.prepare(statements.threads).run(params);
    db.prepare(statements.items).run();
  })();
  db.exec('ANALYZE');
  void app.shutdown(0);
}

/** `fillClosedThreads` through a handle on either backend (the daemon stopped), for tests on both. */
export async function fillClosedThreadsIn(sql: Sql, n: number): Promise<void> {
  const statements = closedThreadsFill(sql.dialect);
  await sql.run(statements.threads, closedThreadsFillParams(n));
  await sql.run(statements.items);
  await sql.run('ANALYZE');
}

/** One row per millisecond, ending a day ago. */
const closedThreadsFillParams = (n: number) => ({ n, t0: Date.now() - n - 86_400_000 });

/** The two fill statements; only the id's hex formatting differs between the backends. */
function closedThreadsFill(dialect: Sql['dialect']): { threads: string; items: string } {
  // Time-ordered ids (UUIDv7 layout), as the daemon makes them.
  const id =
    dialect === 'postgres'
      ? `lpad(to_hex((CAST(@t0 AS bigint) + i) >> 16), 8, '0') || '-' || lpad(to_hex((CAST(@t0 AS bigint) + i) & 65535), 4, '0') || '-7000-8000-' || lpad(to_hex(i), 12, '0')`
      : `printf('%08x-%04x-7000-8000-%012x', (@t0 + i) >> 16, (@t0 + i) & 65535, i)`;
  return {
    threads: `WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < @n - 1)
       INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, parent_thread_id, idempotency_key, created_by, created_at, closed_at)
       SELECT ${id}, 'story_generate_epic', 'project', 'old',
              '{"doc_type":"story_backlog","epic_id":"E' || i || '","project_id":"old"}', 'complete', NULL,
              'story_generate_epic:project:old:story_backlog:E' || i, 'bench', CAST(@t0 AS BIGINT) + i, CAST(@t0 AS BIGINT) + i + 5000
       FROM s`,
    items: `INSERT INTO llm_work_items (id, thread_id, sequence, status, attempt, max_attempts, repair_count, lock_scope, priority,
         not_before, deadline_at, lease_owner, lease_expires_at, error_code, error_message, created_at, started_at, finished_at)
       SELECT substr(id, 1, 19) || '9' || substr(id, 21), id, 1, 'applied', 1, 3, 0, 'epic:old:' || substr(idempotency_key, 47), 1,
              created_at, NULL, NULL, NULL, NULL, NULL, created_at, created_at, closed_at
       FROM llm_threads WHERE space_id = 'old'`,
  };
}

async function claimRun(home: string, run: number): Promise<{ claimsPerSecond: number; activeP50: number }> {
  const seed = appFor(home, 1);
  await seed.engine.stop(0);
  const projectId = `k${run}`;
  await seed.projects.import(projectFile(projectId, K));
  await seed.threads.generateAll(projectId, { force: false, deadlineMs: null, createdBy: 'bench' });
  await seed.shutdown(0);

  const app = appFor(home, K);
  let running = 0;
  const allRunning = new Promise<void>((resolve) =>
    app.bus.subscribe((e) => {
      if (e.type === 'work_item' && e.status === 'running' && ++running === K) resolve();
    }),
  );
  const t0 = performance.now();
  await app.start();
  await allRunning;
  const claimsPerSecond = K / ((performance.now() - t0) / 1000);
  const lat: number[] = [];
  for (let i = 0; i < QUERIES; i++) {
    const q0 = performance.now();
    const list = await app.threads.list({ active: true, projectId: null, limit: 100 });
    lat.push(performance.now() - q0);
    if (list.length !== 100) throw new Error(`expected 100 active threads, got ${list.length}`);
  }
  await app.shutdown(0);
  // Set-up for the next run: the K items and their threads become history, like the 1M before them.
  const db = appFor(home, 1);
  db.db.exec(`UPDATE llm_work_items SET status = 'applied', lease_owner = NULL, lease_expires_at = NULL, finished_at = not_before
              WHERE status IN ('claimed', 'running', 'queued');
              UPDATE llm_threads SET status = 'complete', closed_at = created_at WHERE status IN ('open', 'running');
              DELETE FROM locks;`);
  await db.shutdown(0);
  return { claimsPerSecond, activeP50: quantile(lat, 0.5) };
}

export async function scaleTargets(runs: number, bytesPerThread: number[]): Promise<Row[]> {
  const emptyHome = mkdtempSync(join(tmpdir(), 'cmb-bench-empty-'));
  const bigHome = mkdtempSync(join(tmpdir(), 'cmb-bench-1m-'));
  const claims = { empty: [] as number[], big: [] as number[] };
  const active = { empty: [] as number[], big: [] as number[] };
  const ratioClaims: number[] = [];
  const ratioActive: number[] = [];
  try {
    const t0 = performance.now();
    fillClosedThreads(bigHome, CLOSED_THREADS);
    appFor(emptyHome, 1).shutdown(0);
    const setupS = (performance.now() - t0) / 1000;
    const bigBytes = statSync(join(bigHome, 'combine.db')).size;
    console.error(`scale: ${CLOSED_THREADS.toLocaleString('en-US')} closed threads written in ${setupS.toFixed(1)} s, ${(bigBytes / 2 ** 20).toFixed(0)} MiB`);
    await claimRun(emptyHome, -1); // warm-up
    await claimRun(bigHome, -1);
    for (let run = 0; run < runs; run++) {
      // Alternate which goes first, so that neither always meets the machine in the same state.
      const [e, b] =
        run % 2 === 0
          ? [await claimRun(emptyHome, run), await claimRun(bigHome, run)]
          : await claimRun(bigHome, run).then(async (big) => [await claimRun(emptyHome, run), big] as const);
      claims.empty.push(e.claimsPerSecond);
      claims.big.push(b.claimsPerSecond);
      active.empty.push(e.activeP50);
      active.big.push(b.activeP50);
      ratioClaims.push(e.claimsPerSecond / b.claimsPerSecond);
      ratioActive.push(b.activeP50 / e.activeP50);
    }
    const m = `${(CLOSED_THREADS / 1e6).toFixed(CLOSED_THREADS % 1e6 ? 1 : 0)}M`;
    return [
      row({ target: '5', figure: `claims/s, empty db (claim + prompt entry + call started, ${K} items)`, runs: claims.empty, unit: '/s', goal: '' }),
      row({ target: '5', figure: `claims/s, ${m} closed threads`, runs: claims.big, unit: '/s', goal: '' }),
      row({ target: '5', figure: `claim slowdown, ${m} vs empty (per run)`, runs: ratioClaims, unit: '×', goal: '≤ 1.25×', check: (x) => x <= 1.25 }),
      row({ target: '5', figure: '`threads --active` query p50, empty db (in daemon, 100 rows)', runs: active.empty, unit: 'ms', goal: '' }),
      row({ target: '5', figure: `\`threads --active\` query p50, ${m} closed threads`, runs: active.big, unit: 'ms', goal: '' }),
      row({
        target: '5',
        figure: `\`threads --active\` slowdown, ${m} vs empty (per run)`,
        runs: ratioActive,
        unit: '×',
        goal: '≤ 1.25×',
        check: (x) => x <= 1.25,
      }),
      row({ target: '5', figure: 'bytes per closed thread, full record (db size ÷ threads after target 1 runs)', runs: bytesPerThread, unit: 'B', goal: '' }),
      row({ target: '5', figure: `bytes per closed thread, rows + indexes only (the ${m} db)`, runs: [bigBytes / CLOSED_THREADS], unit: 'B', goal: '' }),
    ];
  } finally {
    rmSync(emptyHome, { recursive: true, force: true });
    rmSync(bigHome, { recursive: true, force: true });
  }
}
