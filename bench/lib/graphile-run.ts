/**
 * Peer for target 1 (issue 20): graphile-worker 0.17 running the durable step (durable-step.ts) on the
 * bench's own Postgres (fsync and synchronous_commit on), with the settings its performance page
 * recommends for throughput (https://worker.graphile.org/docs/performance): 24 concurrent jobs, a local
 * queue of 500 jobs fetched and locked at once, job completions and failures batched
 * (`completeJobBatchDelay` / `failJobBatchDelay` 0: flushed on the next tick). The task writes through
 * the worker's own pool, so the pool is sized for the workers and the tasks together.
 *
 * The jobs are added in one `addJobs` call before the workers start; the figure is jobs done per second
 * from `run()` to the moment the last completion is committed (the jobs table is empty), with the CPU of
 * this process and of the Postgres server (from /proc) per job, the server's bytes written and its WAL
 * bytes per job.
 */
import { EventEmitter } from 'node:events';
import { Logger, makeWorkerUtils, run, type Task, type WorkerEvents } from 'graphile-worker';
import pg from 'pg';
import { callInstantProvider, STEP_TABLES_SQL } from './durable-step.js';
import { serverBytesWritten, serverCpuMicros } from './proc.js';
import { sleep } from './stats.js';

export const GRAPHILE_SETTINGS = { concurrentJobs: 24, localQueueSize: 500, completeJobBatchDelay: 0, failJobBatchDelay: 0 };

const silent = new Logger(() => () => {});

export interface PeerRunResult {
  jobs: number;
  seconds: number;
  perSecond: number;
  /** CPU of this process (user + system) per job, µs. */
  cpuMicrosPerJob: number;
  /** CPU of the Postgres server per job, µs (0 for an in-process SQLite peer). */
  serverCpuMicrosPerJob: number;
  /** Rows inserted, updated or deleted per job; NaN where not counted. */
  rowsPerJob: number;
  /**
   * Bytes passed to write(2) per job by what stores the jobs: this process for SQLite; the Postgres
   * server for graphile-worker (WAL, data files, statistics, replies to its clients).
   */
  bytesPerJob: number;
  /** Postgres WAL bytes per job; NaN for SQLite. */
  walBytesPerJob: number;
}

/** One graphile-worker run of `jobs` durable steps on the (empty) database `url`. */
export async function runGraphileOnce(url: string, postmaster: number, jobs: number): Promise<PeerRunResult> {
  const utils = await makeWorkerUtils({ connectionString: url, logger: silent });
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  try {
    await utils.migrate();
    await admin.query(STEP_TABLES_SQL);
    await utils.addJobs(Array.from({ length: jobs }, (_, i) => ({ identifier: 'durable_step', payload: { i } })));

    let stepsDone = 0;
    let failure: Error | null = null;
    const durableStep: Task = async (_payload, helpers) => {
      const answer = await callInstantProvider();
      await helpers.withPgClient(async (client) => {
        await client.query('BEGIN');
        try {
          const now = Date.now();
          await client.query('INSERT INTO bench_step_result (job_id, answer, created_at) VALUES ($1, $2, $3)', [helpers.job.id, answer.content, now]);
          await client.query('INSERT INTO bench_step_audit (job_id, event, tokens, at) VALUES ($1, $2, $3, $4)', [
            helpers.job.id,
            'step_completed',
            answer.totalTokens,
            now,
          ]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw err;
        }
      });
      stepsDone++;
    };
    const events = new EventEmitter() as WorkerEvents;
    events.on('job:error', ({ error }) => {
      failure ??= error instanceof Error ? error : new Error(String(error));
    });

    const walBefore = await walLsn(admin);
    const serverBefore = serverCpuMicros(postmaster);
    const serverBytesBefore = serverBytesWritten(postmaster);
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const runner = await run({
      logger: silent,
      events,
      noHandleSignals: true,
      taskList: { durable_step: durableStep },
      preset: {
        worker: {
          connectionString: url,
          concurrentJobs: GRAPHILE_SETTINGS.concurrentJobs,
          // The tasks' transactions use this pool too: one client per running task on top of the workers'.
          maxPoolSize: 2 * GRAPHILE_SETTINGS.concurrentJobs + 2,
          localQueue: { size: GRAPHILE_SETTINGS.localQueueSize },
          completeJobBatchDelay: GRAPHILE_SETTINGS.completeJobBatchDelay,
          failJobBatchDelay: GRAPHILE_SETTINGS.failJobBatchDelay,
        },
      },
    });
    try {
      while (stepsDone < jobs && !failure) await sleep(5);
      // The last completions are batched: done when they are committed, i.e. no job is left.
      while (!failure && Number((await admin.query('SELECT count(*) AS n FROM graphile_worker._private_jobs')).rows[0].n) > 0) await sleep(2);
      if (failure) throw failure;
      const seconds = (performance.now() - started) / 1000;
      const cpu = process.cpuUsage(cpuBefore);
      const serverCpu = serverCpuMicros(postmaster) - serverBefore;
      const serverBytes = serverBytesWritten(postmaster) - serverBytesBefore;
      const walBytes = Number((await admin.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1) AS n', [walBefore])).rows[0].n);
      const results = Number((await admin.query('SELECT count(*) AS n FROM bench_step_result')).rows[0].n);
      if (results !== jobs) throw new Error(`graphile-worker: expected ${jobs} result rows, found ${results}`);
      return {
        jobs,
        seconds,
        perSecond: jobs / seconds,
        cpuMicrosPerJob: (cpu.user + cpu.system) / jobs,
        serverCpuMicrosPerJob: serverCpu / jobs,
        rowsPerJob: Number.NaN,
        bytesPerJob: serverBytes / jobs,
        walBytesPerJob: walBytes / jobs,
      };
    } finally {
      await runner.stop();
    }
  } finally {
    await admin.end();
    await utils.release();
  }
}

async function walLsn(client: pg.Client): Promise<string> {
  return (await client.query('SELECT pg_current_wal_lsn() AS lsn')).rows[0].lsn;
}
