/**
 * Load-independent counts of target 1's engine run (issue 20): per item, the SQL statements the process
 * runs, grouped by their prepared text, and the rows they write. Timings on a shared machine are noisy;
 * these counts are not, so a change to the statements can be judged by them first.
 *
 *   npx tsx bench/count-statements.ts [projects=200] [epicsPerProject=10] [--promises] [--top=40]
 *
 * It runs `runEngineOnce` (lib/engine-run.ts: the real App, SQLite file, instant provider) with
 * max_in_flight 256 and counts from the end of the seeding (the `onSeeded` hook) to the last applied item.
 * The counting wraps better-sqlite3's Statement methods in this process only; the production code is
 * unchanged. Rows: `changes` of each `run` (the statement's own rows, triggers not included) and the
 * bench row's `total_changes()` figure (triggers included). `--promises` also counts promises made
 * (an async hook: slower, but a count).
 */
import { createHook } from 'node:async_hooks';
import Database from 'better-sqlite3';
import { runEngineOnce } from './lib/engine-run.js';

interface Kind {
  calls: number;
  rows: number;
}

const args = process.argv.slice(2);
const numbers = args.filter((a) => !a.startsWith('--')).map(Number);
const projects = numbers[0] ?? 200;
const epics = numbers[1] ?? 10;
const countPromises = args.includes('--promises');
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

function count(text: string, rows: number): void {
  if (!counting) return;
  const kind = kindOf(text);
  let k = kinds.get(kind);
  if (!k) kinds.set(kind, (k = { calls: 0, rows: 0 }));
  k.calls++;
  k.rows += rows;
}

// Every statement the App prepares is a Statement of this one class: wrap its methods once.
const probe = new Database(':memory:');
const statementProto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as Record<string, (...a: unknown[]) => unknown>;
probe.close();
for (const method of ['run', 'get', 'all', 'iterate'] as const) {
  const original = statementProto[method]!;
  statementProto[method] = function (this: { source: string }, ...a: unknown[]) {
    const result = original.apply(this, a);
    // A writing statement with RETURNING is a reader: its rows are the ones it returned.
    const rows = method === 'run' ? (result as { changes: number }).changes : /^\s*(UPDATE|INSERT|DELETE)/i.test(this.source) ? returned(method, result) : 0;
    count(this.source, rows);
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
  count(`exec: ${String(text)}`, 0);
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
console.log(`\n   calls/item  rows/item  statement`);
for (const [text, k] of sorted.slice(0, top)) console.log(`${perItem(k.calls)}  ${perItem(k.rows)}  ${text.slice(0, 200)}`);
if (sorted.length > top) console.log(`… ${sorted.length - top} more kinds`);
