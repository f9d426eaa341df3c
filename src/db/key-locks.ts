/**
 * Transaction-scoped locks on a key, for a decision that reads rows before it writes (is a request for
 * this key already active? then deduplicate, supersede or insert): transactions deciding about the same
 * key run one after the other, the second seeing what the first committed — as every write does on
 * SQLite, whose single writer runs them alone.
 */
import type { Sql } from '../core/sql.js';
import { DONE } from './statements.js';

/**
 * Holds `key` until the transaction ends (Postgres: an advisory lock on a 64-bit hash of it, released
 * at COMMIT or ROLLBACK; two keys sharing a hash only wait for each other). A no-op on SQLite.
 */
export function lockKeyForTransaction(sql: Sql, key: string): Promise<void> {
  // Not async: SQLite's no-op runs for every budget decision, and costs no frame this way.
  if (sql.dialect !== 'postgres') return DONE;
  return sql.get('SELECT pg_advisory_xact_lock(hashtextextended(@key, 0)) AS locked', { key }).then(() => undefined);
}

/**
 * Takes `key` until the transaction ends if no other transaction holds it (Postgres:
 * `pg_try_advisory_xact_lock`); false when one does. For work that must run once across daemons sharing
 * a database, where the one that finds it taken skips it: the holder is doing it now. Always true on
 * SQLite (one daemon per database).
 */
export async function tryLockKeyForTransaction(sql: Sql, key: string): Promise<boolean> {
  if (sql.dialect !== 'postgres') return true;
  const row = await sql.get<{ locked: number }>('SELECT pg_try_advisory_xact_lock(hashtextextended(@key, 0)) AS locked', { key });
  return row?.locked === 1;
}
