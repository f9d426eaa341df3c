/**
 * bench/diag-pg.ts `scale 1 3`: what grows with the number of daemons. Each run's server-side counts per item —
 * transactions, rows written per table (pg_stat_user_tables: inserted, updated (HOT), deleted; triggers' writes
 * included), and per statement its calls and rows (pg_stat_statements) — and, after the runs, each count whose
 * per-item figure differs between the first run and the last. Load-independent where batching is not involved:
 * rows written are the item's life; statements and transactions per item move with how many items a closure or a
 * claim round gathers, which depends on the load.
 */
import type pg from 'pg';

export interface PerItemCounts {
  daemons: number;
  items: number;
  xacts: number;
  rollbacks: number;
  /** Per table: rows inserted, updated, of them HOT, deleted. */
  tables: Map<string, { ins: number; upd: number; hot: number; del: number }>;
  /** Per statement (text without its prepared name): calls, rows (returned or changed), server ms (exec + plan). */
  statements: Map<string, { calls: number; rows: number; ms: number }>;
}

/**
 * This tool's own statements (its polls, its wait-event sampler, its report), left out: their count per item
 * follows the run's length, not the daemons' work.
 */
const TOOL_STATEMENT =
  /pg_stat_activity|pg_blocking_pids|percentile_cont|pg_column_size|pg_stat_|^SELECT count\(\*\) AS n FROM llm_work_items WHERE status = \?|pg_backend_pid|^LISTEN /;

/**
 * A statement's text as every daemon sends it: whitespace folded, without `BEGIN; ` and its prepared statement's name
 * (numbered per process), its constants and parameters as `?` (pg_stat_statements keeps the text of a statement's first
 * call: a prepared statement's literals stay, another daemon's copy of the same statement may show `$n` instead).
 */
function statementKey(query: string): string {
  return query
    .replace(/\s+/g, ' ')
    .replace(/^BEGIN; /, '')
    .replace(/^PREPARE \w+ AS /, '')
    .replace(/'(?:[^']|'')*'/g, '?')
    .replace(/\$\d+/g, '?')
    .replace(/\b\d+\b/g, '?');
}

export async function readPerItemCounts(admin: pg.Client, dbName: string, dbClient: pg.Client, items: number, daemons: number): Promise<PerItemCounts> {
  const d = (await admin.query('SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = $1', [dbName])).rows[0];
  const tables = new Map<string, { ins: number; upd: number; hot: number; del: number }>();
  const t = await dbClient.query('SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables');
  for (const r of t.rows) {
    tables.set(r.relname, {
      ins: Number(r.n_tup_ins) / items,
      upd: Number(r.n_tup_upd) / items,
      hot: Number(r.n_tup_hot_upd) / items,
      del: Number(r.n_tup_del) / items,
    });
  }
  const statements = new Map<string, { calls: number; rows: number; ms: number }>();
  const s = await admin.query(
    `SELECT s.query, s.calls, s.rows, s.total_exec_time + s.total_plan_time AS ms FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = $1`,
    [dbName],
  );
  for (const r of s.rows) {
    const key = statementKey(String(r.query));
    if (TOOL_STATEMENT.test(key)) continue;
    const was = statements.get(key) ?? { calls: 0, rows: 0, ms: 0 };
    statements.set(key, { calls: was.calls + Number(r.calls) / items, rows: was.rows + Number(r.rows) / items, ms: was.ms + Number(r.ms) / items });
  }
  return { daemons, items, xacts: Number(d.xact_commit) / items, rollbacks: Number(d.xact_rollback) / items, tables, statements };
}

const sum = <T>(values: Iterable<T>, f: (v: T) => number): number => {
  let total = 0;
  for (const v of values) total += f(v);
  return total;
};

/**
 * One run's totals per item: transactions, statements (the daemons'), rows written. Transactions are the database's
 * (pg_stat_database): this tool's polls and samples are among them, and so is each wake-up of a LISTEN session (Postgres
 * reads the notification queue in a transaction of its own) — every daemon's session, for every notifying commit.
 */
export function printPerItemTotals(c: PerItemCounts): void {
  const written = sum(c.tables.values(), (t) => t.ins + t.upd + t.del);
  const hot = sum(c.tables.values(), (t) => t.hot);
  console.log(
    `per item: transactions ${c.xacts.toFixed(2)} (rollbacks ${c.rollbacks.toFixed(3)}; every session's, LISTEN wake-ups and this tool's included); the daemons' statements ${sum(c.statements.values(), (s) => s.calls).toFixed(2)}; rows written ${written.toFixed(2)} (HOT updates ${hot.toFixed(2)}); server ms in statements ${sum(c.statements.values(), (s) => s.ms).toFixed(3)}`,
  );
}

/**
 * The counts per item that differ between the first run and the last (`scale 1 3`: 1 daemon → 3), largest
 * difference first: tables by rows written, statements by calls and rows. Differences under `minDelta` per item are left out.
 */
export function printPerItemGrowth(runs: readonly PerItemCounts[], minDelta = 0.02): void {
  if (runs.length < 2) return;
  const a = runs[0]!;
  const b = runs.at(-1)!;
  const f = (v: number) => v.toFixed(2);
  console.log(`\n=== per item, ${a.daemons} → ${b.daemons} daemon(s) (differences of ${minDelta} or more)`);
  console.log(`transactions ${f(a.xacts)} → ${f(b.xacts)}; rollbacks ${a.rollbacks.toFixed(3)} → ${b.rollbacks.toFixed(3)}`);
  console.log('rows written per table (ins + upd + del; upd HOT):');
  for (const name of new Set([...a.tables.keys(), ...b.tables.keys()])) {
    const x = a.tables.get(name) ?? { ins: 0, upd: 0, hot: 0, del: 0 };
    const y = b.tables.get(name) ?? { ins: 0, upd: 0, hot: 0, del: 0 };
    const wx = x.ins + x.upd + x.del;
    const wy = y.ins + y.upd + y.del;
    if (Math.abs(wy - wx) < minDelta && Math.abs(y.hot - x.hot) < minDelta) continue;
    console.log(
      `  ${name.padEnd(22)} ${f(wx)} → ${f(wy)}  (ins ${f(x.ins)} → ${f(y.ins)}, upd ${f(x.upd)} → ${f(y.upd)}, HOT ${f(x.hot)} → ${f(y.hot)}, del ${f(x.del)} → ${f(y.del)})`,
    );
  }
  console.log('statements (calls per item, rows per item, server ms per item):');
  const keys = new Set([...a.statements.keys(), ...b.statements.keys()]);
  const zero = { calls: 0, rows: 0, ms: 0 };
  const diffs = [...keys]
    .map((k) => ({ k, x: a.statements.get(k) ?? zero, y: b.statements.get(k) ?? zero }))
    .filter(({ x, y }) => Math.abs(y.calls - x.calls) >= minDelta || Math.abs(y.rows - x.rows) >= minDelta)
    .sort((p, q) => Math.abs(q.y.calls - q.x.calls) - Math.abs(p.y.calls - p.x.calls));
  const line = ({ k, x, y }: (typeof diffs)[number]) =>
    console.log(
      `  calls ${f(x.calls).padStart(5)} → ${f(y.calls).padStart(5)}  rows ${f(x.rows).padStart(6)} → ${f(y.rows).padStart(6)}  ms ${x.ms.toFixed(3)} → ${y.ms.toFixed(3)}  ${k.slice(0, 110)}`,
    );
  for (const d of diffs) line(d);
  // Server time per item (lock waits included: a statement waiting for another daemon's transaction), the largest changes.
  console.log('statements by server ms per item (the 8 largest changes; lock waits included):');
  const byTime = [...keys]
    .map((k) => ({ k, x: a.statements.get(k) ?? zero, y: b.statements.get(k) ?? zero }))
    .sort((p, q) => Math.abs(q.y.ms - q.x.ms) - Math.abs(p.y.ms - p.x.ms))
    .slice(0, 8);
  for (const d of byTime) line(d);
}
