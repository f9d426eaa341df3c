/**
 * Target 1's group commits and I/O (issue 20): per item of the engine run, the writer's COMMITs (how many
 * items each holds, how long each blocks the thread: the WAL frames' write calls, their fsync and, every
 * `wal_autocheckpoint` frames, the checkpoint SQLite runs inside that COMMIT) and the process's read and
 * write calls (/proc/self/io: WAL frames are two write calls each, a header and a page; a checkpoint reads
 * each page back from the WAL and writes it into the database file).
 *
 *   npx tsx bench/commit-io.ts [runs=2] [projects=200] [epicsPerProject=10]
 *
 * Each run is `runEngineOnce` (lib/engine-run.ts) after a warm-up of 200 items, counted from the end of
 * the seeding to the last applied item. The counts (commits, calls, bytes) do not depend on the machine's
 * load; the COMMIT times do. The COMMIT is timed by wrapping better-sqlite3's `Statement.prototype.run`
 * in this process only.
 */
import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { runEngineOnce } from './lib/engine-run.js';

const [runs = 2, projects = 200, epics = 10] = process.argv.slice(2).map(Number);

const commitMicros: number[] = [];
let counting = false;
const probe = new Database(':memory:');
const statementProto = Object.getPrototypeOf(probe.prepare('SELECT 1')) as { run: (...a: unknown[]) => unknown };
probe.close();
const run = statementProto.run;
statementProto.run = function (this: { source: string }, ...a: unknown[]) {
  if (!counting || this.source !== 'COMMIT') return run.apply(this, a);
  const started = performance.now();
  try {
    return run.apply(this, a);
  } finally {
    commitMicros.push((performance.now() - started) * 1000);
  }
};

/** This process's I/O counters: calls and bytes of read(2)/write(2) and their kin. */
function io(): Record<string, number> {
  const lines = readFileSync('/proc/self/io', 'utf8').trim().split('\n');
  return Object.fromEntries(lines.map((l) => [l.split(': ')[0]!, Number(l.split(': ')[1])]));
}

await runEngineOnce({ projects: 20, epicsPerProject: 10, maxInFlight: 256 });
for (let r = 0; r < runs; r++) {
  commitMicros.length = 0;
  let before: Record<string, number> = {};
  let after: Record<string, number> = {};
  const result = await runEngineOnce({
    projects,
    epicsPerProject: epics,
    maxInFlight: 256,
    onSeeded: async () => {
      before = io();
      counting = true;
    },
    onApplied: () => {
      counting = false;
      after = io();
    },
  });
  const n = result.items;
  const per = (key: string) => ((after[key]! - before[key]!) / n).toFixed(2);
  const sorted = [...commitMicros].sort((a, b) => a - b);
  const q = (p: number) => Math.round(sorted[Math.floor(p * (sorted.length - 1))] ?? Number.NaN);
  console.log(
    `run ${r + 1}: ${n} items, ${Math.round(result.perSecond)} items/s, ${Math.round(result.cpuMicrosPerItem)} µs CPU per item; ` +
      `${commitMicros.length} commits (${(n / commitMicros.length).toFixed(2)} items each), COMMIT blocking ${Math.round(sorted.reduce((a, b) => a + b, 0) / n)} µs per item, ` +
      `p50/p90/p99/max ${q(0.5)}/${q(0.9)}/${q(0.99)}/${q(1)} µs; per item: ${per('syscw')} write calls, ${(Number(per('wchar')) / 1000).toFixed(1)} KB written, ` +
      `${per('syscr')} read calls`,
  );
}
