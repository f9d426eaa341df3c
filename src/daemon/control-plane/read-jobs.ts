/**
 * The long reads of the control plane, as jobs a worker thread runs on its own read-only connection
 * (read-worker.ts): verifying the whole ledger, exporting threads, counting what a prune would remove.
 * Each job reads one snapshot of the database (one read transaction), so its answer is consistent
 * while the daemon keeps writing.
 */
import type { Sql } from '../../core/sql.js';
import { exportLedger } from '../../ledger/transfer.js';
import { verifyLedger } from '../../ledger/verify.js';
import { previewPrune } from '../services/retention.js';

export const READ_JOBS = {
  verifyLedger: (sql: Sql) => verifyLedger(sql),
  exportLedger: (sql: Sql, a: { scope: { threadId: string | null; projectId: string | null }; now: number }) => exportLedger(sql, a.scope, a.now),
  previewPrune: (sql: Sql, a: { cutoff: number }) => previewPrune({ sql }, a.cutoff),
};

export type ReadJobName = keyof typeof READ_JOBS;
export type ReadJobArgs<J extends ReadJobName> = Parameters<(typeof READ_JOBS)[J]>[1];
export type ReadJobResult<J extends ReadJobName> = Awaited<ReturnType<(typeof READ_JOBS)[J]>>;

/** The database the worker opens its own connection to (plain data: it crosses to the worker thread). */
export type ReadTarget = { kind: 'sqlite'; dbPath: string; busyTimeoutMs: number } | { kind: 'postgres'; url: string };

/** The worker's connection, and how it reads one snapshot on it (SQLite: a read transaction; Postgres: REPEATABLE READ). */
export interface SnapshotConnection {
  readonly sql: Sql;
  snapshot<T>(read: () => Promise<T>): Promise<T>;
}

/**
 * Runs a job in one read transaction (one consistent snapshot). The job awaits its statements, so the
 * caller must not start another job on the same connection before this one settles (read-worker.ts
 * runs them one after another): a second BEGIN would fail, and the two would share one snapshot.
 */
export function runReadJob<J extends ReadJobName>(conn: SnapshotConnection, job: J, args: ReadJobArgs<J>): Promise<ReadJobResult<J>> {
  return conn.snapshot(() => (READ_JOBS[job] as (sql: Sql, a: unknown) => Promise<ReadJobResult<J>>)(conn.sql, args));
}
