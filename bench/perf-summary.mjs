// Where the Postgres server's CPU goes, from a `perf record --call-graph dwarf` of its processes
// (bench/diag-pg.ts with DIAG_PERF=<file> DIAG_PERF_CALLGRAPH=1):
//
//   perf script -i <file> --comm postgres -F comm,pid,ip,sym > /tmp/pg.txt
//   node bench/perf-summary.mjs /tmp/pg.txt                 # samples by category (first match, in the order below)
//   node bench/perf-summary.mjs /tmp/pg.txt ExecLockRows 4  # what runs under a frame, 4 frames deep
//
// Categories are by the server function a sample is under; the first that matches takes the sample.
import { readFileSync } from 'node:fs';

const [file, root, depthArg] = process.argv.slice(2);
if (!file) throw new Error('usage: node bench/perf-summary.mjs <perf script output> [frame [depth]]');

/** Each sample's frames, leaf first. */
const samples = [];
let current = null;
for (const line of readFileSync(file, 'utf8').split('\n')) {
  if (line.trim() === '') {
    if (current) samples.push(current);
    current = null;
  } else if (line[0] !== '\t' && line[0] !== ' ') {
    current = [];
  } else {
    const sym = line
      .trim()
      .split(/\s+/)
      .slice(1)
      .join(' ')
      .replace(/ \(inlined\)$/, '');
    current?.push(sym || '?');
  }
}
if (current) samples.push(current);
const pct = (n) => `${((100 * n) / samples.length).toFixed(1).padStart(5)}%`;
const anyOf = (names) => (frames) => names.some((n) => frames.has(n));

const ledger = (frames) => frames.has('plpgsql_exec_function');
const CATEGORIES = [
  ['plpgsql function (llm_ledger_append): FOR UPDATE of the chain head', (f) => ledger(f) && f.has('ExecLockRows')],
  ['plpgsql function (llm_ledger_append): INSERT of the entries and its triggers', (f) => ledger(f) && f.has('ExecInsert')],
  ['plpgsql function (llm_ledger_append): the rest', ledger],
  ['plpgsql triggers (outside the function)', anyOf(['plpgsql_exec_trigger'])],
  ['foreign-key checks', anyOf(['RI_FKey_check'])],
  ['commit: WAL flush (fsync)', anyOf(['XLogFlush'])],
  ['commit: the rest', anyOf(['CommitTransaction'])],
  ['planning', anyOf(['planner', 'pgss_planner'])],
  ['parse and analyse', anyOf(['raw_parser', 'pg_parse_query', 'pg_analyze_and_rewrite_fixedparams', 'pg_analyze_and_rewrite_varparams'])],
  ['executor start', anyOf(['standard_ExecutorStart'])],
  ['executor end', anyOf(['standard_ExecutorEnd'])],
  ['executor run', anyOf(['standard_ExecutorRun'])],
  ['EXECUTE / plan cache', anyOf(['ExecuteQuery', 'GetCachedPlan', 'EvaluateParams', 'RevalidateCachedQuery'])],
  ['receiving (socket read, waiting for the client)', anyOf(['pq_getbyte', 'pq_recvbuf', 'secure_read', 'pq_getmessage'])],
  ['sending (socket write)', anyOf(['socket_flush', 'internal_flush_buffer', 'secure_write', 'pq_flush'])],
  ['statistics', (f) => [...f].some((x) => x.startsWith('pgstat_'))],
  // Left over: per-message overhead (portals, memory contexts, ps display, pg_stat_statements' store), each < 0.5 %.
];

if (root) {
  const depth = Number(depthArg ?? 3);
  const below = new Map();
  let under = 0;
  for (const s of samples) {
    const i = s.indexOf(root);
    if (i < 0) continue;
    under++;
    const key = s.slice(0, i).reverse().slice(0, depth).join(' > ') || '(self)';
    below.set(key, (below.get(key) ?? 0) + 1);
  }
  console.log(`${pct(under)} of ${samples.length} samples are under ${root}`);
  for (const [k, v] of [...below].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${pct(v)}  ${k}`);
} else {
  const counts = new Map();
  for (const s of samples) {
    const frames = new Set(s);
    const hit = CATEGORIES.find(([, match]) => match(frames));
    const name = hit ? hit[0] : 'other';
    counts.set(name, (counts.get(name) ?? 0) + 1);
  }
  console.log(`${samples.length} samples`);
  for (const [k, v] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`${pct(v)}  ${k}`);
}
