/**
 * The worker thread of the control plane's long reads (reader.ts starts it): its own read-only
 * connection, one job at a time, answers posted back. It never writes.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from '../../db/connection.js';
import { connectPostgres } from '../../db/pg/connection.js';
import { PgSql } from '../../db/pg/sql.js';
import { SqliteSql } from '../../db/sql.js';
import { CommandError } from '../../core/errors.js';
import { isStalePreparedStatement } from '../../db/errors.js';
import { runReadJob, type ReadJobName, type ReadTarget, type SnapshotConnection } from './read-jobs.js';

/** The worker's connection, which it can close (to open another). */
interface WorkerConnection extends SnapshotConnection {
  close(): Promise<void>;
}

async function open(target: ReadTarget): Promise<WorkerConnection> {
  if (target.kind === 'sqlite') {
    const db = openDatabase(target.dbPath, { readonly: true, busyTimeoutMs: target.busyTimeoutMs });
    return {
      sql: new SqliteSql(db),
      async snapshot(read) {
        db.exec('BEGIN');
        try {
          return await read();
        } finally {
          db.exec('COMMIT');
        }
      },
      close: async () => {
        db.close();
      },
    };
  }
  const client = await connectPostgres(target.url);
  // A failed connection is reported by the job that uses it; without a listener it would end the thread.
  client.on('error', () => {});
  const sql = new PgSql(client);
  return {
    sql,
    async snapshot(read) {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      try {
        return await read();
      } finally {
        await client.query('COMMIT');
      }
    },
    close: () => client.end(),
  };
}

function opened(): Promise<WorkerConnection> {
  const connection = open(workerData as ReadTarget);
  // Handled where a job awaits it (the job fails with the reason); not an unhandled rejection meanwhile.
  connection.catch(() => {});
  return connection;
}

let connection = opened();

interface JobMessage {
  id: number;
  job: ReadJobName;
  args: never;
}

async function answer(m: JobMessage): Promise<void> {
  try {
    parentPort!.postMessage({ id: m.id, ok: true, result: await run(m) });
  } catch (err) {
    const e = err as Error;
    const command = err instanceof CommandError ? { kind: err.kind, code: err.code ?? null } : null;
    parentPort!.postMessage({ id: m.id, ok: false, error: { name: e.name, message: e.message, command } });
  }
}

/**
 * The job's result. A statement whose prepared plan went stale on this connection (another daemon changed
 * the schema under it: db/errors.ts `isStalePreparedStatement`) fails the same way there until the connection
 * is closed: it is closed (its snapshot ended: it read nothing more), and the job runs again, once, on a new one.
 */
async function run(m: JobMessage): Promise<unknown> {
  // A connection that failed to open (or to open again below) is not kept for good: each job tries a new one.
  const current = await connection.catch(() => (connection = opened()));
  try {
    return await runReadJob(current, m.job, m.args);
  } catch (err) {
    if (!isStalePreparedStatement(err)) throw err;
    connection = opened();
    await current.close().catch(() => {});
    return runReadJob(await connection, m.job, m.args);
  }
}

// Jobs await their statements: a job that arrives while another runs waits for it (one read
// transaction at a time on the connection).
let queue: Promise<void> = Promise.resolve();
parentPort!.on('message', (m: JobMessage) => {
  queue = queue.then(() => answer(m));
});
