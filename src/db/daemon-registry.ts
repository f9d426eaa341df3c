/**
 * The registry of daemons sharing a Postgres database (`llm_daemons`, pg/schema.ts): each live daemon's
 * owner id and the limits it enforces. Postgres only: a SQLite database has one daemon.
 */
import type { Sql } from '../core/sql.js';
import { lockKeyForTransaction } from './key-locks.js';
import { expectOneChange } from './statements.js';

export interface DaemonRegistration {
  owner: string;
  settings_hash: string;
  settings: string;
  started_at: number;
  seen_at: number;
  /** 1 while the daemon claims bulk work (not paused by pressure or storage, not stopping), else 0. */
  claiming: number;
}

/** Serializes registrations: two daemons starting together with different limits cannot both see none. */
export function lockDaemonRegistry(sql: Sql): Promise<void> {
  return lockKeyForTransaction(sql, 'combine:daemon-registry');
}

/**
 * Removes the rows of daemons not seen since `staleBefore` (killed without a goodbye: their leases have
 * lapsed too) and of the earlier processes of this home (`home_prefix`: the home lock proves them dead).
 */
// Deletes of any number of rows (none is fine): no changed-row count to check.
export async function removeLapsedDaemons(sql: Sql, p: { staleBefore: number; home_prefix: string }): Promise<void> {
  await sql.run('DELETE FROM llm_daemons WHERE seen_at < @staleBefore OR substr(owner, 1, length(@home_prefix)) = @home_prefix', p);
}

/** The daemons registered now, oldest first. */
export function listDaemons(sql: Sql): Promise<DaemonRegistration[]> {
  return sql.all<DaemonRegistration>('SELECT * FROM llm_daemons ORDER BY started_at, owner');
}

export async function registerDaemon(sql: Sql, row: DaemonRegistration): Promise<void> {
  expectOneChange(
    await sql.run(
      'INSERT INTO llm_daemons (owner, settings_hash, settings, started_at, seen_at, claiming) VALUES (@owner, @settings_hash, @settings, @started_at, @seen_at, @claiming)',
      { ...row },
    ),
    `register daemon ${row.owner}`,
  );
}

/**
 * Renews this daemon's row, with whether it claims bulk work now (`claiming`, 1 or 0). False when it is
 * gone: another daemon found it lapsed (this one stalled for longer than a lease) and removed it; the
 * caller registers again.
 */
export async function renewDaemon(sql: Sql, p: { owner: string; seen_at: number; claiming: number }): Promise<boolean> {
  return (await sql.run('UPDATE llm_daemons SET seen_at = @seen_at, claiming = @claiming WHERE owner = @owner', p)).changes === 1;
}

/** This daemon's row, if it is still there (a lapsed row may already be gone). */
export async function unregisterDaemon(sql: Sql, owner: string): Promise<void> {
  await sql.run('DELETE FROM llm_daemons WHERE owner = ?', [owner]);
}
