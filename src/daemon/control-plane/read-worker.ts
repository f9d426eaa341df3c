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
import { runReadJob, type ReadJobName, type ReadTarget, type SnapshotConnection } from './read-jobs.js';

async function open(target: ReadTarget): Promise<SnapshotConnection> {
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
  };
}

const connection = open(workerData as ReadTarget);
// Handled where a job awaits it (the job fails with the reason); not an unhandled rejection meanwhile.
connection.catch(() => {});

interface JobMessage {
  id: number;
  job: ReadJobName;
  args: never;
}

async function answer(m: JobMessage): Promise<void> {
  try {
    parentPort!.postMessage({ id: m.id, ok: true, result: await runReadJob(await connection, m.job, m.args) });
  } catch (err) {
    const e = err as Error;
    const command = err instanceof CommandError ? { kind: err.kind, code: err.code ?? null } : null;
    parentPort!.postMessage({ id: m.id, ok: false, error: { name: e.name, message: e.message, command } });
  }
}

// Jobs await their statements: a job that arrives while another runs waits for it (one read
// transaction at a time on the connection).
let queue: Promise<void> = Promise.resolve();
parentPort!.on('message', (m: JobMessage) => {
  queue = queue.then(() => answer(m));
});
