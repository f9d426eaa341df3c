/**
 * The long reads of the control plane, as jobs a worker thread runs on its own read-only connection
 * (read-worker.ts): verifying the whole ledger, exporting threads, counting what a prune would remove.
 * Each job reads one snapshot of the database (one read transaction), so its answer is consistent
 * while the daemon keeps writing.
 */
import type { Db } from '../../db/connection.js';
import { exportLedger } from '../../ledger/transfer.js';
import { verifyLedger } from '../../ledger/verify.js';
import { previewPrune } from '../services/retention.js';

export const READ_JOBS = {
  verifyLedger: (db: Db) => verifyLedger(db),
  exportLedger: (db: Db, a: { scope: { threadId: string | null; projectId: string | null }; now: number }) => exportLedger(db, a.scope, a.now),
  previewPrune: (db: Db, a: { cutoff: number }) => previewPrune({ db }, a.cutoff),
};

export type ReadJobName = keyof typeof READ_JOBS;
export type ReadJobArgs<J extends ReadJobName> = Parameters<(typeof READ_JOBS)[J]>[1];
export type ReadJobResult<J extends ReadJobName> = ReturnType<(typeof READ_JOBS)[J]>;

/** Runs a job in one read transaction (one consistent snapshot). */
export function runReadJob<J extends ReadJobName>(db: Db, job: J, args: ReadJobArgs<J>): ReadJobResult<J> {
  db.exec('BEGIN');
  try {
    return (READ_JOBS[job] as (db: Db, a: unknown) => ReadJobResult<J>)(db, args);
  } finally {
    db.exec('COMMIT');
  }
}
