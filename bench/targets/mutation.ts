/**
 * Issue 20, target 2: a mutation's cost does not grow with its document. One project's story backlog
 * holds every epic's stories (10 epics, or 2,000); then one epic's stories are generated again
 * (`story_generate_epic --force`) K times in a row, each waited for until applied. Per item: wall time
 * from the request to `applied`, and this process's CPU. The full lifecycle is timed (claim, call,
 * ledger, the mutation, commit), in process, the instant provider, SQLite synchronous=FULL: what a user
 * regenerating one epic waits for. Both backlogs are measured in each run, back to back.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { App } from '../../src/daemon/app.js';
import { loadConfig } from '../../src/daemon/config/config.js';
import { createLogger } from '../../src/daemon/runtime/logger.js';
import { projectFile } from '../lib/daemon.js';
import { instantProvider } from '../lib/engine-run.js';
import { startProfiler } from '../lib/profile.js';
import { quantile, row, type Row } from '../lib/stats.js';

const SMALL = 10;
const LARGE = Number(process.env.BENCH_MUTATION_EPICS ?? 2000);
const K = 60;

interface Backlog {
  app: App;
  home: string;
  projectId: string;
}

function untilApplied(app: App, count: number): Promise<void> {
  let applied = 0;
  return new Promise<void>((resolve, reject) => {
    const off = app.bus.subscribe((e) => {
      if (e.type === 'work_item' && e.status === 'applied' && ++applied === count) {
        off();
        resolve();
      }
      if (e.type === 'work_item' && (e.status === 'dead_letter' || e.status === 'failed')) reject(new Error(`bench item ended ${e.status}: ${e.error_code}`));
    });
  });
}

/** A running App whose project's backlog holds stories for each of its `epics` epics. */
async function backlogOf(epics: number): Promise<Backlog> {
  const home = mkdtempSync(join(tmpdir(), 'cmb-bench-mutation-'));
  const loaded = loadConfig(home, { OPENAI_BASE_URL: 'http://127.0.0.1:9/v1', OPENAI_API_KEY: 'bench', COMBINE_MODEL: 'bench' });
  const config = { ...loaded, maxInFlight: 64, pressure: { ...loaded.pressure, enabled: false } };
  const app = new App({ config, logger: createLogger(null, 'silent'), provider: instantProvider() });
  const projectId = `m${epics}`;
  await app.projects.import(projectFile(projectId, epics));
  const filled = untilApplied(app, epics);
  await app.start();
  await app.threads.generateAll(projectId, { force: false, deadlineMs: null, createdBy: 'bench' });
  await filled;
  return { app, home, projectId };
}

/** K regenerations of epic E1, one after the other: per item, milliseconds (wall) and CPU µs. */
async function regenerate(b: Backlog, k: number, profile: string | null = null): Promise<{ wallMs: number[]; cpuMicros: number[] }> {
  const profiler = profile ? await startProfiler() : null;
  const wallMs: number[] = [];
  const cpuMicros: number[] = [];
  for (let i = 0; i < k; i++) {
    const applied = untilApplied(b.app, 1);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await b.app.threads.generateEpic(b.projectId, 'E1', { force: true, deadlineMs: null, createdBy: 'bench' });
    await applied;
    wallMs.push(performance.now() - t0);
    const cpu = process.cpuUsage(cpu0);
    cpuMicros.push(cpu.user + cpu.system);
  }
  await profiler?.stop(profile!);
  return { wallMs, cpuMicros };
}

async function close(b: Backlog): Promise<void> {
  await b.app.shutdown(0);
  rmSync(b.home, { recursive: true, force: true });
}

export async function mutationTargets(runs: number): Promise<Row[]> {
  const small = await backlogOf(SMALL);
  const large = await backlogOf(LARGE);
  const p50 = { small: [] as number[], large: [] as number[], ratio: [] as number[] };
  const cpu = { small: [] as number[], large: [] as number[], ratio: [] as number[] };
  try {
    await regenerate(small, 10); // warm-up
    await regenerate(large, 10);
    for (let run = 0; run < runs; run++) {
      const s = await regenerate(small, K, `mutation-${SMALL}`);
      const l = await regenerate(large, K, `mutation-${LARGE}`);
      p50.small.push(quantile(s.wallMs, 0.5));
      p50.large.push(quantile(l.wallMs, 0.5));
      p50.ratio.push(quantile(l.wallMs, 0.5) / quantile(s.wallMs, 0.5));
      cpu.small.push(quantile(s.cpuMicros, 0.5));
      cpu.large.push(quantile(l.cpuMicros, 0.5));
      cpu.ratio.push(quantile(l.cpuMicros, 0.5) / quantile(s.cpuMicros, 0.5));
    }
  } finally {
    await close(small);
    await close(large);
  }
  return [
    row({ target: '20.2', figure: `one epic's stories applied, backlog of ${SMALL} epics: ms per item, p50`, runs: p50.small, unit: 'ms', goal: '' }),
    row({ target: '20.2', figure: `one epic's stories applied, backlog of ${LARGE} epics: ms per item, p50`, runs: p50.large, unit: 'ms', goal: '' }),
    row({ target: '20.2', figure: `CPU µs per item, ${SMALL} epics (p50)`, runs: cpu.small, unit: 'µs', goal: '' }),
    row({ target: '20.2', figure: `CPU µs per item, ${LARGE} epics (p50)`, runs: cpu.large, unit: 'µs', goal: '' }),
    row({ target: '20.2', figure: `CPU per item, ${LARGE} epics ÷ ${SMALL} epics (per run)`, runs: cpu.ratio, unit: '×', goal: '' }),
    row({
      target: '20.2',
      figure: `ms per item, ${LARGE} epics ÷ ${SMALL} epics (per run)`,
      runs: p50.ratio,
      unit: '×',
      goal: '≤ 1.25×',
      check: (m) => m <= 1.25,
    }),
  ];
}
