/**
 * Transaction-scoped locks on a key, for a decision that reads rows before it writes (is a request for
 * this key already active? then deduplicate, supersede or insert): transactions deciding about the same
 * key run one after the other, the second seeing what the first committed — as every write does on
 * SQLite, whose single writer runs them alone.
 */
import type { Sql } from '../core/sql.js';

/**
 * Holds `key` until the transaction ends (Postgres: an advisory lock on a 64-bit hash of it, released
 * at COMMIT or ROLLBACK; two keys sharing a hash only wait for each other). A no-op on SQLite.
 */
export async function lockKeyForTransaction(sql: Sql, key: string): Promise<void> {
  if (sql.dialect !== 'postgres') return;
  await sql.get('SELECT pg_advisory_xact_lock(hashtextextended(@key, 0)) AS locked', { key });
}
