/**
 * Target 8 — control-plane isolation (issue 16): the real daemon answers commands while `ledger verify`
 * reads a ledger of 1,000,000 entries. Verify runs in the control plane's worker thread on its own
 * read connection (src/daemon/control-plane), so the event loop that acknowledges commands never waits
 * for it.
 *
 * Set-up (not timed): 250,000 complete threads with their applied work items and 4 chained ledger
 * entries each, written with SQL. The daemon runs with a provider that holds every call and
 * max_in_flight 1 (as target 2), so acks measure the command path. Per run: 200 sequential
 * `generate.epic` acks with nothing else running (the baseline of the same run), then `ledger.verify`
 * is started and acks are sent one after another until it answers: their p50 and p95, how many, and
 * how long verify took.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteSql } from '../../src/db/sql.js';
import { createSimulator } from '../../src/sim/simulator.js';
import { BenchDaemon, projectFile } from '../lib/daemon.js';
import { fillLedger } from '../lib/ledger-fill.js';
import { quantile, row, type Row } from '../lib/stats.js';
import { appFor, fillClosedThreads } from './scale.js';

const LEDGER_ENTRIES = Number(process.env.BENCH_LEDGER_ENTRIES ?? 1_000_000);
const IDLE_ACKS = 200;
const EPICS = 20_000;

export async function controlPlaneTargets(runs: number): Promise<Row[]> {
  const home = mkdtempSync(join(tmpdir(), 'cmb-bench-control-'));
  const threads = Math.ceil(LEDGER_ENTRIES / 4);
  fillClosedThreads(home, threads);
  const app = appFor(home, 1);
  const written = await fillLedger(new SqliteSql(app.db), threads);
  await app.shutdown(0);

  const sim = await createSimulator({ faults: [{ kind: 'hang' }] });
  const d = BenchDaemon.inHome(home, sim.url, { engine: { max_in_flight: 1 }, canary: { interval: 0 } });
  const idleP95: number[] = [];
  const duringP50: number[] = [];
  const duringP95: number[] = [];
  const acksDuring: number[] = [];
  const verifyMs: number[] = [];
  let epic = 0;
  const ack = async () => {
    const target = { project_id: 'c', epic_id: `E${++epic}` };
    const t0 = performance.now();
    const r = await d.client.generate.epic.mutate({ ...target, force: false, deadline_ms: null, created_by: 'bench' });
    if (r.deduplicated) throw new Error('bench: a command was deduplicated; it did not write');
    return performance.now() - t0;
  };
  try {
    await d.start();
    await d.importProject(projectFile('c', EPICS));
    for (let i = 0; i < 100; i++) await ack(); // warm-up
    const warm = await d.client.ledger.verify.query(); // the worker started, its statements prepared
    if (warm.entries < written) throw new Error(`bench: verify saw ${warm.entries} entries, ${written} were written`);
    for (let run = 0; run < runs; run++) {
      const idle: number[] = [];
      for (let i = 0; i < IDLE_ACKS; i++) idle.push(await ack());
      idleP95.push(quantile(idle, 0.95));

      const during: number[] = [];
      let done = false;
      const t0 = performance.now();
      const verify = d.client.ledger.verify.query().then((r) => {
        done = true;
        verifyMs.push(performance.now() - t0);
        return r;
      });
      while (!done) during.push(await ack());
      await verify;
      duringP50.push(quantile(during, 0.5));
      duringP95.push(quantile(during, 0.95));
      acksDuring.push(during.length);
    }
  } finally {
    await d.dispose();
    await sim.close();
  }
  const n = LEDGER_ENTRIES.toLocaleString('en-US');
  return [
    row({ target: '8', figure: `ledger verify of ${n} entries, wall time`, runs: verifyMs, unit: 'ms', goal: '' }),
    row({ target: '8', figure: 'command ack p95, nothing else running (same run)', runs: idleP95, unit: 'ms', goal: '' }),
    row({ target: '8', figure: `command ack p50 while ledger verify runs (${n} entries)`, runs: duringP50, unit: 'ms', goal: '' }),
    row({ target: '8', figure: `command ack p95 while ledger verify runs (${n} entries)`, runs: duringP95, unit: 'ms', goal: '≤ 5 ms', check: (m) => m <= 5 }),
    row({ target: '8', figure: 'acks answered during one verify', runs: acksDuring, unit: '', goal: '' }),
  ];
}
