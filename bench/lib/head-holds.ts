/**
 * diag-pg's DIAG_HOLDS=1 (target 9): how long the daemons' transactions hold and wait for documents' heads, read from the
 * server's own statement log (every statement with its duration: `log_min_duration_statement` 0 over the measured
 * run only, the server's stderr written to a file as it comes). Each daemon's sessions carry its name (`PGAPPNAME`), so a transaction is known by its daemon.
 *
 * A closure of answers (engine/leased.ts `ItemReads`, db/projects.ts `lockDocumentHeads`) is a transaction that runs the
 * key statement (`pg_advisory_xact_lock` over its targets' `document:` keys) and the heads' `FOR UPDATE OF d`: per closure,
 * the heads it locks (distinct targets, distinct projects), how long it waited for the keys and the heads (those two
 * statements' durations: the lock waits, nearly all of it), and how long it held them (from the key statement's start to the
 * end of its COMMIT query). An answer applied alone locks its one head by `lockDocumentHead` (`… FOR UPDATE` on one target).
 * The statement log costs the server time: read the CPU figures of a run without it.
 */
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import type pg from 'pg';
import { sum } from './stats.js';

/**
 * The server flags for the statement log: each line prefixed with its time, backend and application (nothing is logged
 * until `startHoldsLog`). The server's stderr is given to `holdsLogSink`.
 */
export const HOLDS_LOG_FLAGS = ['-c', 'log_line_prefix=%m|%p|%a|'];

/** Where the server's log goes while DIAG_HOLDS runs: appended to `file` as it comes. */
export function holdsLogSink(file: string): (chunk: string) => void {
  return (chunk) => appendFileSync(file, chunk);
}

/** Logs every statement from now on, into `file` emptied first (a second scale run reads only its own). */
export async function startHoldsLog(admin: pg.Client, file: string): Promise<void> {
  writeFileSync(file, '');
  await admin.query('ALTER SYSTEM SET log_min_duration_statement = 0');
  await admin.query('SELECT pg_reload_conf()');
}

export async function stopHoldsLog(admin: pg.Client): Promise<void> {
  await admin.query('ALTER SYSTEM RESET log_min_duration_statement');
  await admin.query('SELECT pg_reload_conf()');
  // The collector writes what the backends sent it: give it a moment.
  await new Promise((r) => setTimeout(r, 500));
}

interface LogLine {
  timestamp: string;
  pid: number;
  application_name?: string;
  message?: string;
  detail?: string;
}

/** One transaction of a daemon's session, as the log shows it. */
interface Txn {
  daemon: string;
  begin: number;
  end: number;
  rolledBack: boolean;
  /** The closure of answers' key statement: its start, its duration (ms). */
  keysAt?: number;
  keysWait: number;
  heads: number;
  projects: number;
  headsWait: number;
  /** `lockDocumentHead` statements (an answer alone), their summed duration. */
  singleHeads: number;
  singleWait: number;
  /** Statements sent after the key statement (each a round trip: the heads, the applies, the COMMIT query), and the COMMIT query's duration (ms). */
  heldTrips: number;
  commitMs: number;
  /** Per orchestration whose child this transaction ended (a child's end locks it until the COMMIT: engine/tx.ts LOCK ORDER 4), when it was first locked. */
  parentsAt: Map<string, number>;
  /** A single key waited for (a budget's, or a closure of answers' first target's before it tries the others). */
  keyWaitAt?: number;
  keyWait: number;
}

const DURATION = /^duration: ([\d.]+) ms {2}(?:statement|execute [^:]*): ([\s\S]*)$/;

const RECORD = /^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) UTC\|(\d+)\|([^|]*)\|(LOG|DETAIL|[A-Z]+): {2}/;

/** The statement log's records of the daemons' sessions (`diag-d<i>`), in order, each LOG with its DETAIL. */
function readLog(file: string): LogLine[] {
  const lines: LogLine[] = [];
  let last: LogLine | undefined;
  for (const l of readFileSync(file, 'utf8').split('\n')) {
    const m = RECORD.exec(l);
    if (!m) {
      // A statement's text goes on over lines of its own.
      if (last?.message !== undefined && last.detail === undefined) last.message += `\n${l}`;
      continue;
    }
    const rest = l.slice(m[0].length);
    if (m[4] === 'DETAIL') {
      if (last && last.pid === Number(m[2])) last.detail = rest;
      continue;
    }
    last = undefined;
    if (m[4] !== 'LOG' || !m[3]!.startsWith('diag-d')) continue;
    last = { timestamp: `${m[1]} UTC`, pid: Number(m[2]), application_name: m[3], message: rest };
    lines.push(last);
  }
  return lines;
}

/** The values of an extended-protocol statement's parameters, from the log line's detail (`Parameters: $1 = '…', …`). */
function firstParam(detail: string | undefined): string | undefined {
  const m = /\$1 = '((?:[^']|'')*)'/.exec(detail ?? '');
  return m ? m[1]!.replaceAll("''", "'") : undefined;
}

function transactions(lines: readonly LogLine[]): Txn[] {
  const open = new Map<number, Txn>();
  const done: Txn[] = [];
  for (const l of lines) {
    const m = DURATION.exec(l.message ?? '');
    if (!m) continue;
    const ms = Number(m[1]);
    const text = m[2]!;
    const end = Date.parse(l.timestamp.replace(' UTC', 'Z').replace(' ', 'T'));
    const start = end - ms;
    let t = open.get(l.pid);
    if (/^\s*BEGIN/.test(text)) {
      t = {
        daemon: l.application_name!,
        begin: start,
        end,
        rolledBack: false,
        keysWait: 0,
        heads: 0,
        projects: 0,
        headsWait: 0,
        singleHeads: 0,
        singleWait: 0,
        heldTrips: 0,
        commitMs: 0,
        keyWait: 0,
        parentsAt: new Map(),
      };
      open.set(l.pid, t);
    }
    if (!t) continue;
    t.end = end;
    if (t.keysAt !== undefined) t.heldTrips++;
    if (text.includes('advisory_xact_lock(hashtextextended(s.k')) {
      // The keys tried (or waited for) in key order; a key waited for alone just before (`lockKeyForTransaction`) counts too.
      t.keysAt = t.keyWaitAt ?? start;
      t.keysWait += ms + t.keyWait;
    } else if (text.includes('pg_advisory_xact_lock(hashtextextended($1, 0))')) {
      t.keyWaitAt ??= start;
      t.keyWait += ms;
    } else if (text.includes('FOR UPDATE OF d')) {
      const targets = JSON.parse(firstParam(l.detail) ?? '[]') as { project_id: string; doc_type: string; doc_key: string }[];
      t.heads = new Set(targets.map((x) => JSON.stringify(x))).size;
      t.projects = new Set(targets.map((x) => x.project_id)).size;
      t.headsWait += ms;
    } else if (text.includes('end_thread_lock_parent(')) {
      // Its last parameter is the orchestration it locks for the close check (db/thread-close.ts `endChildLockingParent`).
      const parent = /\$7 = '([^']*)'\s*$/.exec(l.detail ?? '')?.[1] ?? /\$5 = '([^']*)'\s*$/.exec(l.detail ?? '')?.[1];
      if (parent && !t.parentsAt.has(parent)) t.parentsAt.set(parent, start);
    } else if (/FROM documents WHERE project_id = \$1 AND doc_type = \$2 AND doc_key = \$3 FOR UPDATE/.test(text)) {
      t.singleHeads++;
      t.singleWait += ms;
    }
    const commits = /\bCOMMIT\s*;?\s*$/.test(text);
    if (commits || /^\s*ROLLBACK/.test(text)) {
      t.rolledBack = !commits;
      t.commitMs = ms;
      done.push(t);
      open.delete(l.pid);
    }
  }
  return done;
}

const pct = (xs: readonly number[], p: number): number => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};
const f1 = (n: number): string => n.toFixed(1);

/** Time-averaged and peak count of intervals open at once. */
function overlap(spans: readonly [number, number][], length: number): { mean: number; peak: number; twoOrMore: number } {
  const ev = spans.flatMap(([a, b]): [number, number][] => [
    [a, 1],
    [b, -1],
  ]);
  ev.sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let n = 0;
  let peak = 0;
  let last = ev[0]?.[0] ?? 0;
  let two = 0;
  for (const [t, d] of ev) {
    if (n >= 2) two += t - last;
    last = t;
    n += d;
    peak = Math.max(peak, n);
  }
  return { mean: sum(spans.map(([a, b]) => b - a)) / length, peak, twoOrMore: two / length };
}

/** Prints the closures of answers' heads, waits and holds over the measured run (`items` applied in `runMs`). */
export function printHeadHolds(logFile: string, items: number, runMs: number): void {
  const txns = transactions(readLog(logFile));
  const closures = txns.filter((t) => t.keysAt !== undefined);
  const singles = txns.filter((t) => t.singleHeads > 0);
  const daemons = [...new Set(txns.map((t) => t.daemon))].sort();
  console.log(
    `head holds (statement log): ${txns.length} daemon transactions (${(txns.length / items).toFixed(2)}/item, ${txns.filter((t) => t.rolledBack).length} rolled back); closures of answers ${closures.length} (${f1((items - singles.length) / closures.length)} answers each on average), answers applied alone with a head lock ${singles.length}`,
  );
  if (closures.length === 0) return;
  const hold = closures.map((t) => t.end - t.keysAt!);
  const wait = closures.map((t) => t.keysWait + t.headsWait);
  console.log(
    `  per closure of answers: heads p50 ${pct(
      closures.map((t) => t.heads),
      0.5,
    )} (mean ${f1(sum(closures.map((t) => t.heads)) / closures.length)}), projects mean ${f1(sum(closures.map((t) => t.projects)) / closures.length)}; ` +
      `keys + heads wait p50/p90/mean ${f1(pct(wait, 0.5))}/${f1(pct(wait, 0.9))}/${f1(sum(wait) / closures.length)} ms (keys ${f1(sum(closures.map((t) => t.keysWait)) / closures.length)}, heads ${f1(sum(closures.map((t) => t.headsWait)) / closures.length)}); ` +
      `held from the keys to the COMMIT's end p50/p90/mean ${f1(pct(hold, 0.5))}/${f1(pct(hold, 0.9))}/${f1(sum(hold) / closures.length)} ms; whole transaction mean ${f1(sum(closures.map((t) => t.end - t.begin)) / closures.length)} ms; ` +
      `round trips while holding mean ${f1(sum(closures.map((t) => t.heldTrips)) / closures.length)}, the COMMIT query mean ${f1(sum(closures.map((t) => t.commitMs)) / closures.length)} ms`,
  );
  const parentHolds = closures.flatMap((t) => [...t.parentsAt.values()].map((at) => t.end - at));
  // The heads from the moment they are all granted (after the keys' and the heads' waits).
  const projectHolds = closures.map((t) => t.end - (t.keysAt! + t.keysWait + t.headsWait));
  console.log(
    `  orchestrations a closure of answers locks (its children's ends) ${f1(sum(closures.map((t) => t.parentsAt.size)) / closures.length)} per closure, each held from its first child's end to the COMMIT's end p50/mean ${f1(pct(parentHolds, 0.5))}/${f1(sum(parentHolds) / Math.max(1, parentHolds.length))} ms (the heads, from their grant: ${f1(pct(projectHolds, 0.5))}/${f1(sum(projectHolds) / closures.length)} ms)`,
  );
  const spans = closures.map((t): [number, number] => [t.keysAt!, t.end]);
  const all = overlap(spans, runMs);
  const waitingSpans = closures.map((t): [number, number] => [t.keysAt!, t.keysAt! + t.keysWait + t.headsWait]);
  console.log(
    `  closures holding or waiting for heads, all daemons: ${all.mean.toFixed(2)} on average (peak ${all.peak}), two or more ${(all.twoOrMore * 100).toFixed(0)} % of the run; waiting: ${overlap(waitingSpans, runMs).mean.toFixed(2)} on average`,
  );
  for (const d of daemons) {
    const mine = closures.filter((t) => t.daemon === d);
    const o = overlap(
      mine.map((t): [number, number] => [t.keysAt!, t.end]),
      runMs,
    );
    const holding = overlap(
      mine.map((t): [number, number] => [t.keysAt! + t.keysWait + t.headsWait, t.end]),
      runMs,
    );
    console.log(
      `  ${d}: ${mine.length} closures of answers, open at once ${o.mean.toFixed(2)} on average (peak ${o.peak}), holding heads (after the wait) ${(holding.mean * 100).toFixed(0)} % of the run, waiting ${(((o.mean - holding.mean) * 100) | 0).toFixed(0)} %`,
    );
  }
  if (singles.length > 0)
    console.log(
      `  answers alone: ${singles.length} transactions, head waits p50/p90 ${f1(
        pct(
          singles.map((t) => t.singleWait),
          0.5,
        ),
      )}/${f1(
        pct(
          singles.map((t) => t.singleWait),
          0.9,
        ),
      )} ms`,
    );
}
