/**
 * Load-independent counts of target 1's engine run (issue 20): per item, the SQL statements the process
 * runs, grouped by their prepared text, and the rows they write. Timings on a shared machine are noisy;
 * these counts are not, so a change to the statements can be judged by them first.
 *
 *   npx tsx bench/count-statements.ts [projects=200] [epicsPerProject=10] [--promises] [--time] [--top=40]
 *
 * It runs `runEngineOnce` (lib/engine-run.ts: the real App, SQLite file, instant provider) with
 * max_in_flight 256 and counts from the end of the seeding (the `onSeeded` hook) to the last applied item.
 * The counting wraps better-sqlite3's Statement methods in this process only; the production code is
 * unchanged. Rows: `changes` of each `run` (the statement's own rows, triggers not included) and the
 * bench row's `total_changes()` figure (triggers included). `--promises` also counts promises made
 * (an async hook: slower, but a count). `--time` adds the CPU time spent inside each kind's calls (binding,
 * SQLite's execution, the row's values; process CPU read around each call, which adds its own cost to the
 * run): load-dependent, for comparing kinds within one run.
 */
import { createHook } from 'node:async_hooks';
import Database from 'better-sqlite3';
import { runEngineOnce } from './lib/engine-run.js';

interface Kind {
  calls: number;
  rows: number;
  /** CPU time inside better-sqlite3's call (binding, SQLite's run, the row's values), ns; with --time. */
  ns: number;
}

const args = process.argv.slice(2);
const numbers = args.filter((a) => !a.startsWith('--')).map(Number);
const projects = numbers[0] ?? 200;
const epics = numbers[1] ?? 10;
const countPromises = args.includes('--promises');
// Timed, not counted: load-dependent, but shows which statements cost most relative to each other.
const timed = args.includes('--time');
const top = Number(args.find((a) => a.startsWith('--top='))?.slice(6) ?? 40);

const kinds = new Map<string, Kind>();
let counting = false;

/** One line per statement kind: whitespace folded, a multi-row VALUES list and an IN list folded to one. */
function kindOf(text: string): string {
  return text
    .replace(/\s+/g, ' ')
    .replace(/(\(\?(?:, ?\?)*\))(?:, ?\(\?(?:, ?\?)*\))+/g, '$1, …')
    .replace(/IN \(\?(?:, ?\?)+\)/g, 'IN (?, …)')
    .trim();
}

function count(text: string, rows: number, ns: number): void {
  if (!counting) return;
  const kind = kindOf(text);
  let k = kinds.get(kind);
  if (!k) kinds.set(kind, (k = { calls: 0, rows: 0, ns: 0 }));
  k.calls++;
  k.rows += rows;
  k.ns += ns;
}

// Every statement the App prepares is a Statement of this one class: wrap its methods once.
const probe = new Database(':memory:');
const statementProto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>;
probe.close();
for (const method of ['run', 'get', 'all', 'iterate'] as const) {
  const original = statementProto[method]!;
  statementProto[method] = function (this: { source: string }, ...a: unknown[]) {
    // CPU time, not wall time: a call that waits (COMMIT's fsync) or a process descheduled on a loaded machine would dominate.
    const started = timed ? process.cpuUsage() : undefined;
    const result = original.apply(this, a);
    const used = started ? process.cpuUsage(started) : undefined;
    const ns = used ? (used.user + used.system) * 1000 : 0;
    // A writing statement with RETURNING is a reader: its rows are the ones it returned.
    const rows = method === 'run' ? (result as { changes: number }).changes : /^\s*(UPDATE|INSERT|DELETE)/i.test(this.source) ? returned(method, result) : 0;
    count(this.source, rows, ns);
    return result;
  };
}
function returned(method: 'get' | 'all' | 'iterate', result: unknown): number {
  if (method === 'all') return (result as unknown[]).length;
  return method === 'get' && result !== undefined ? 1 : 0;
}

const dbProto = Database.prototype as unknown as Record<string, (...a: unknown[]) => unknown>;
const exec = dbProto.exec!;
dbProto.exec = function (this: unknown, text: unknown) {
  count(`exec: ${String(text)}`, 0, 0);
  return exec.call(this, text);
};

let promises = 0;
const hook = createHook({
  init(_id, type) {
    if (type === 'PROMISE') promises++;
  },
});

const result = await runEngineOnce({
  projects,
  epicsPerProject: epics,
  maxInFlight: 256,
  onSeeded: async () => {
    counting = true;
    if (countPromises) hook.enable();
  },
  onApplied: () => {
    counting = false;
    hook.disable();
  },
});

const items = result.items;
const perItem = (n: number) => (n / items).toFixed(3).padStart(8);
const sorted = [...kinds.entries()].sort((a, b) => b[1].calls - a[1].calls);
const total = sorted.reduce((n, [, k]) => n + k.calls, 0);
const totalRows = sorted.reduce((n, [, k]) => n + k.rows, 0);
const byVerb = new Map<string, number>();
for (const [text, k] of sorted) {
  const verb = /^(exec: )?\s*(\w+)/.exec(text)?.[2]?.toUpperCase() ?? '?';
  byVerb.set(verb, (byVerb.get(verb) ?? 0) + k.calls);
}

console.log(`${items} items (${projects} projects × ${epics} epics), max_in_flight 256, counted from engine start to the last applied item`);
console.log(`statements per item: ${(total / items).toFixed(2)}`);
console.log(`  by verb: ${[...byVerb.entries()].map(([v, n]) => `${v} ${(n / items).toFixed(2)}`).join(', ')}`);
console.log(`rows changed by the statements themselves per item: ${(totalRows / items).toFixed(2)}`);
console.log(`rows written per item (total_changes, triggers included; the bench row): ${result.rowsChangedPerItem.toFixed(2)}`);
console.log(`rows added per item: ${result.rowsAddedPerItem.toFixed(2)}`);
console.log(`bytes written per item: ${Math.round(result.bytesWrittenPerItem)} (daemon.log ${Math.round(result.logBytesPerItem)})`);
if (countPromises) console.log(`promises per item: ${(promises / items).toFixed(1)}`);
if (timed)
  console.log(
    `CPU inside the statements' calls per item: ${(sorted.reduce((n, [, k]) => n + k.ns, 0) / items / 1000).toFixed(1)} µs (process CPU, all threads, read around each call: load-dependent; engine CPU per item ${Math.round(result.cpuMicrosPerItem)} µs, the reads included)`,
  );
console.log(`\n   calls/item  rows/item${timed ? '  µs/item' : ''}  statement`);
for (const [text, k] of sorted.slice(0, top)) {
  const time = timed ? `  ${(k.ns / items / 1000).toFixed(1).padStart(7)}` : '';
  console.log(`${perItem(k.calls)}  ${perItem(k.rows)}${time}  ${text.slice(0, 200)}`);
}
if (sorted.length > top) console.log(`… ${sorted.length - top} more kinds`);
