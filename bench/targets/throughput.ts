/**
 * Target 1: engine throughput against plainjob's no-op rate, each run pairing one engine run with one
 * plainjob run so that the ratio compares figures taken under the same machine load.
 *
 * Engine workload: 200 projects × 10 epics (2,000 items, generate-all per project), max_in_flight 256,
 * the in-process instant provider, synchronous=FULL, the full lifecycle: claim, prompt entry, call,
 * response entry, validation, parse_report, the backlog mutation, mutation_report, thread closing.
 * An extra row runs the same workload through the `openai` SDK over HTTP to the simulator, in process.
 */
import { createSimulator } from '../../src/sim/simulator.js';
import { runEngineOnce } from '../lib/engine-run.js';
import { runPlainjobOnce } from '../lib/plainjob-run.js';
import { row, type Row } from '../lib/stats.js';

const WORKLOAD = { projects: 200, epicsPerProject: 10, maxInFlight: 256 };
const PLAINJOB_JOBS = 20_000;

export interface ThroughputResult {
  rows: Row[];
  bytesPerThread: number[];
}

export async function throughputTargets(runs: number): Promise<ThroughputResult> {
  const engine: number[] = [];
  const engineCpu: number[] = [];
  const plainjob: number[] = [];
  const ratio: number[] = [];
  const viaHttp: number[] = [];
  const bytesPerThread: number[] = [];
  await runEngineOnce({ ...WORKLOAD, projects: 20 }); // warm-up
  await runPlainjobOnce(2000);
  const sim = await createSimulator();
  try {
    for (let run = 0; run < runs; run++) {
      const e = await runEngineOnce(WORKLOAD);
      const p = await runPlainjobOnce(PLAINJOB_JOBS);
      engine.push(e.perSecond);
      engineCpu.push(e.cpuMicrosPerItem);
      plainjob.push(p.perSecond);
      ratio.push(e.perSecond / p.perSecond);
      bytesPerThread.push(e.bytesPerThread);
      viaHttp.push((await runEngineOnce({ ...WORKLOAD, baseURL: sim.url })).perSecond);
    }
  } finally {
    await sim.close();
  }
  return {
    bytesPerThread,
    rows: [
      row({ target: '1', figure: 'engine items/s (full lifecycle, instant in-process provider, FULL sync)', runs: engine, unit: '/s', goal: '' }),
      row({ target: '1', figure: 'engine CPU µs per item (same runs; user + system)', runs: engineCpu, unit: 'µs', goal: '' }),
      row({ target: '1', figure: 'plainjob no-op jobs/s (same runs)', runs: plainjob, unit: '/s', goal: '' }),
      row({ target: '1', figure: 'engine ÷ plainjob (per run)', runs: ratio, unit: '×', goal: '≥ 1.0×', check: (m) => m >= 1 }),
      row({ target: '1', figure: 'engine items/s via openai SDK + HTTP simulator (in process)', runs: viaHttp, unit: '/s', goal: '' }),
    ],
  };
}
