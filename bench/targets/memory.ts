/**
 * Target 6: resident memory of the real daemon process with 2,000 provider calls in flight against a
 * provider (the simulator, over HTTP) that answers after 5 s; max_in_flight raised to 2,000 for the run.
 * RSS is read from /proc/<pid>/status every 50 ms from the submit until every call has been answered
 * (on a loaded machine the 2,000 claims can take longer than the 5 s wait); the figure is the peak.
 * Per open call: (peak − idle) / 2,000. GC time: the daemon's `combine_gc_seconds_total` across the run.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { createSimulator } from '../../src/sim/simulator.js';
import { BenchDaemon, projectFile } from '../lib/daemon.js';
import { row, sleep, type Row } from '../lib/stats.js';

const IN_FLIGHT = 2000;
const ANSWER_AFTER_MS = 5000;
const MiB = 2 ** 20;
/** A run that has not seen every call answered by then is cut (and its rows show fewer calls open). */
const RUN_LIMIT_MS = 90_000;

export async function memoryTargets(runs: number): Promise<Row[]> {
  const peak: number[] = [];
  const idle: number[] = [];
  const reached: number[] = [];
  const perCall: number[] = [];
  const gcMs: number[] = [];
  const tcp: number[] = [];
  for (let run = 0; run < runs; run++) {
    const sim = await createSimulator({ latencyMs: ANSWER_AFTER_MS });
    const d = BenchDaemon.inTempHome(sim.url, { engine: { max_in_flight: IN_FLIGHT }, provider: { timeout: '60s' } });
    try {
      await d.start();
      await d.importProject(projectFile('m', IN_FLIGHT));
      await sleep(200);
      const idleBytes = d.rssBytes();
      idle.push(idleBytes / MiB);
      const gcBefore = await gcSeconds(d);
      const connectionsBefore = sim.connections;
      await d.client.generate.all.mutate({ project_id: 'm' });
      let max = 0;
      let maxInFlight = 0;
      let snapshotAsked = false;
      const until = Date.now() + RUN_LIMIT_MS;
      while (Date.now() < until) {
        max = Math.max(max, d.rssBytes());
        const open = sim.calls.filter((c) => c.status === null).length;
        maxInFlight = Math.max(maxInFlight, open);
        if (sim.calls.length >= IN_FLIGHT && open === 0) break;
        // BENCH_HEAPSNAP: one heap snapshot at the peak of the first run (the daemon runs with
        // --heapsnapshot-signal); it stalls the daemon for seconds, so that run's RSS is not comparable.
        if (process.env.BENCH_HEAPSNAP && run === 0 && open >= IN_FLIGHT && !snapshotAsked) {
          snapshotAsked = true;
          process.kill(d.pid, 'SIGUSR2');
        }
        await sleep(50);
      }
      if (snapshotAsked) await snapshotWritten(process.env.BENCH_HEAPSNAP!);
      peak.push(max / MiB);
      reached.push(maxInFlight);
      perCall.push((max - idleBytes) / IN_FLIGHT / 1024);
      gcMs.push(((await gcSeconds(d)) - gcBefore) * 1000);
      tcp.push(sim.connections - connectionsBefore);
    } finally {
      await d.dispose();
      await sim.close();
    }
  }
  return [
    row({ target: '6', figure: 'daemon RSS, idle (project of 2,000 epics imported)', runs: idle, unit: 'MiB', goal: '' }),
    row({ target: '6', figure: 'provider calls open at once (peak)', runs: reached, unit: '', goal: `${IN_FLIGHT}`, check: (m) => m >= IN_FLIGHT }),
    row({
      target: '6',
      figure: `daemon peak RSS, ${IN_FLIGHT} calls in flight (answer after 5 s)`,
      runs: peak,
      unit: 'MiB',
      goal: '≤ 160 MiB',
      check: (m) => m <= 160,
    }),
    row({ target: '6', figure: 'bytes per open call: (peak − idle) / 2,000', runs: perCall, unit: 'KiB', goal: '' }),
    row({ target: '6', figure: 'daemon GC time, submit to the answers recorded', runs: gcMs, unit: 'ms', goal: '' }),
    row({ target: '6', figure: `TCP connections the provider saw for ${IN_FLIGHT} calls`, runs: tcp, unit: '', goal: '' }),
  ];
}

/**
 * The daemon's `combine_gc_seconds_total`. Asked again until it answers: on a loaded machine the daemon
 * can leave a query unanswered while it records 2,000 answers at once.
 */
async function gcSeconds(d: BenchDaemon): Promise<number> {
  for (let attempt = 0; ; attempt++) {
    try {
      const text = await d.client.metrics.query(undefined, { signal: AbortSignal.timeout(10_000) });
      const m = /^combine_gc_seconds_total (\S+)$/m.exec(String(text));
      return m ? Number(m[1]) : Number.NaN;
    } catch {
      // Unanswered for ~2 minutes: the row shows NaN rather than losing the run's other figures.
      if (attempt >= 12) return Number.NaN;
      await sleep(1000);
    }
  }
}

/** Waits until the daemon has finished writing its heap snapshot (the file stops growing). */
async function snapshotWritten(dir: string): Promise<void> {
  let last = -1;
  for (let i = 0; i < 120; i++) {
    await sleep(1000);
    const file = readdirSync(dir).find((f) => f.endsWith('.heapsnapshot'));
    const size = file ? statSync(join(dir, file)).size : 0;
    if (size > 0 && size === last) return;
    last = size;
  }
}
