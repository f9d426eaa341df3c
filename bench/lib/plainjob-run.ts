/**
 * The SQLite peer: plainjob (a job queue for better-sqlite3), one worker as shipped (its own pragmas: WAL,
 * synchronous=NORMAL, one autocommit per state change). Jobs are enqueued in one transaction first; the
 * figure is jobs done per second from worker start to the last completion.
 *
 * Two workloads: no-op jobs (plainjob as shipped), and the durable step of target 1 (durable-step.ts:
 * the job awaits the instant fake provider, then writes a result row and an audit row in one
 * transaction on the queue's own database) with synchronous=FULL (an fsync per commit, as combine)
 * or NORMAL.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { better, defineQueue, defineWorker } from 'plainjob';
import { callInstantProvider, STEP_TABLES_SQL } from './durable-step.js';
import type { PeerRunResult } from './graphile-run.js';
import { bytesWrittenBySelf } from './proc.js';

const silent = { error() {}, warn() {}, info() {}, debug() {} };

export interface PlainjobRunOptions {
  jobs: number;
  /** Absent: no-op jobs as shipped (synchronous=NORMAL). */
  durableStep?: { synchronous: 'FULL' | 'NORMAL' };
}

export async function runPlainjobOnce(o: PlainjobRunOptions): Promise<PeerRunResult> {
  const dir = mkdtempSync(join(tmpdir(), 'cmb-bench-plainjob-'));
  try {
    const db = new Database(join(dir, 'plainjob.db'));
    const queue = defineQueue({ connection: better(db), logger: silent });
    if (o.durableStep) {
      db.pragma(`synchronous = ${o.durableStep.synchronous}`); // after defineQueue, which sets NORMAL
      db.exec(STEP_TABLES_SQL);
    }
    db.transaction(() => {
      for (let i = 0; i < o.jobs; i++) queue.add('job', { i });
    })();
    const step = o.durableStep ? durableStep(db) : async () => {};
    let done = 0;
    let finish!: () => void;
    const finished = new Promise<void>((r) => (finish = r));
    const worker = defineWorker('job', step, {
      queue,
      logger: silent,
      onCompleted: () => {
        if (++done === o.jobs) finish();
      },
    });
    const changesBefore = totalChanges(db);
    const bytesBefore = bytesWrittenBySelf();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    void worker.start();
    await finished;
    const seconds = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    const bytes = bytesWrittenBySelf() - bytesBefore;
    const rows = totalChanges(db) - changesBefore;
    await worker.stop();
    queue.close();
    return {
      jobs: o.jobs,
      seconds,
      perSecond: o.jobs / seconds,
      cpuMicrosPerJob: (cpu.user + cpu.system) / o.jobs,
      serverCpuMicrosPerJob: 0,
      rowsPerJob: rows / o.jobs,
      bytesPerJob: bytes / o.jobs,
      walBytesPerJob: Number.NaN,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The durable step on the queue's own database: the answer, then the result and audit rows in one transaction. */
function durableStep(db: Database.Database): (job: { id: number }) => Promise<void> {
  const insertResult = db.prepare('INSERT INTO bench_step_result (job_id, answer, created_at) VALUES (?, ?, ?)');
  const insertAudit = db.prepare('INSERT INTO bench_step_audit (job_id, event, tokens, at) VALUES (?, ?, ?, ?)');
  const writeStep = db.transaction((jobId: number, content: string, tokens: number) => {
    const now = Date.now();
    insertResult.run(jobId, content, now);
    insertAudit.run(jobId, 'step_completed', tokens, now);
  });
  return async (job) => {
    const answer = await callInstantProvider();
    writeStep(job.id, answer.content, answer.totalTokens);
  };
}

/** Rows inserted, updated or deleted on this connection since it opened (triggers included). */
function totalChanges(db: Database.Database): number {
  return (db.prepare('SELECT total_changes() AS n').get() as { n: number }).n;
}
