/**
 * The worker thread of the control plane's long reads (reader.ts starts it): its own read-only
 * connection, one job at a time, answers posted back. It never writes.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { openDatabase } from '../../db/connection.js';
import { CommandError } from '../../core/errors.js';
import { runReadJob, type ReadJobName } from './read-jobs.js';

const { dbPath, busyTimeoutMs } = workerData as { dbPath: string; busyTimeoutMs: number };
const db = openDatabase(dbPath, { readonly: true, busyTimeoutMs });

interface JobMessage {
  id: number;
  job: ReadJobName;
  args: never;
}

async function answer(m: JobMessage): Promise<void> {
  try {
    parentPort!.postMessage({ id: m.id, ok: true, result: await runReadJob(db, m.job, m.args) });
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
