/**
 * `npm run bench`: every performance target of issue 6 in one run, printed as one table (figure, median
 * over runs, spread, target, pass/miss). Ratios compare figures taken in the same run, because these
 * machines are shared and noisy. Builds dist/ first (the daemon and CLI benchmarks run the real bundle).
 *
 *   npm run bench                        all targets, 5 runs each (under 10 minutes on 2 cores)
 *   npm run bench -- --only ack,cli      some targets: throughput, ack, queue, cli, scale, memory, http, control, postgres, mutation
 *   npm run bench -- --runs 7
 *   BENCH_PROFILE_DIR=/tmp/prof npm run bench -- --only throughput   CPU profiles of the measured phases
 *   BENCH_SCALE_THREADS=100000 ...       a smaller "big" database for a quick look (targets 5 and 7)
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openDatabase } from '../src/db/connection.js';
import { ROOT } from './lib/daemon.js';
import { quantile, renderTable, row, type Row } from './lib/stats.js';
import { ackTargets, queueToRunTarget } from './targets/ack.js';
import { cliTargets } from './targets/cli.js';
import { controlPlaneTargets } from './targets/control.js';
import { httpTargets } from './targets/http.js';
import { memoryTargets } from './targets/memory.js';
import { mutationTargets } from './targets/mutation.js';
import { postgresTargets } from './targets/postgres.js';
import { scaleTargets } from './targets/scale.js';
import { throughputTargets } from './targets/throughput.js';

const ALL = ['throughput', 'ack', 'queue', 'cli', 'scale', 'memory', 'http', 'control', 'postgres', 'mutation'] as const;

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? undefined : process.argv[i + 1];
}

/** The disk's own floor, in the same run: single-row commits with synchronous=FULL, one fsync each. */
function fsyncBaseline(runs: number): Row[] {
  const p50: number[] = [];
  const p95: number[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'cmb-bench-fsync-'));
  try {
    const db = openDatabase(join(dir, 'f.db'));
    db.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
    const insert = db.prepare('INSERT INTO t (v) VALUES (?)');
    for (let run = 0; run < runs; run++) {
      const lat: number[] = [];
      for (let i = 0; i < 500; i++) {
        const t0 = performance.now();
        insert.run('x');
        lat.push(performance.now() - t0);
      }
      p50.push(quantile(lat, 0.5));
      p95.push(quantile(lat, 0.95));
    }
    db.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return [
    row({ target: '0', figure: 'baseline: one fsync’d SQLite commit (WAL, FULL), p50', runs: p50, unit: 'ms', goal: '' }),
    row({ target: '0', figure: 'baseline: one fsync’d SQLite commit (WAL, FULL), p95', runs: p95, unit: 'ms', goal: '' }),
  ];
}

async function main(): Promise<void> {
  const runs = Number(arg('runs') ?? 5);
  const only = (arg('only')?.split(',') ?? [...ALL]) as string[];
  const unknown = only.filter((o) => !(ALL as readonly string[]).includes(o));
  if (unknown.length > 0 || !Number.isInteger(runs) || runs < 1) {
    console.error(`usage: npm run bench -- [--runs N] [--only ${ALL.join(',')}]`);
    process.exit(2);
  }
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build.mjs')], { stdio: 'inherit' });
  const started = Date.now();
  const rows: Row[] = [];
  const step = async (name: string, fn: () => Promise<Row[]> | Row[]) => {
    const t0 = Date.now();
    process.stderr.write(`bench: ${name}…\n`);
    rows.push(...(await fn()));
    process.stderr.write(`bench: ${name} done in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
  };
  await step('baseline', () => fsyncBaseline(runs));
  let bytesPerThread: number[] = [];
  if (only.includes('throughput')) {
    await step('throughput', async () => {
      const r = await throughputTargets(runs);
      bytesPerThread = r.bytesPerThread;
      return r.rows;
    });
  }
  if (only.includes('ack')) await step('ack', () => ackTargets(runs));
  if (only.includes('queue')) await step('queue', () => queueToRunTarget(runs));
  if (only.includes('cli')) await step('cli', () => cliTargets(runs));
  if (only.includes('scale')) await step('scale', () => scaleTargets(runs, bytesPerThread));
  if (only.includes('memory')) await step('memory', () => memoryTargets(runs));
  if (only.includes('http')) await step('http', () => httpTargets(runs));
  if (only.includes('control')) await step('control', () => controlPlaneTargets(runs));
  if (only.includes('postgres')) await step('postgres', () => postgresTargets(runs));
  if (only.includes('mutation')) await step('mutation', () => mutationTargets(runs));

  const header = `${new Date().toISOString().slice(0, 10)} — ${cpus().length} × ${cpus()[0]?.model.trim()}, Node ${process.version}, ${runs} runs per figure, ${((Date.now() - started) / 1000).toFixed(0)} s`;
  const table = renderTable(rows);
  console.log(`\n${header}\n\n${table}`);
  mkdirSync(join(ROOT, 'bench', '.out'), { recursive: true });
  writeFileSync(join(ROOT, 'bench', '.out', 'last-run.md'), `${header}\n\n${table}\n`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
