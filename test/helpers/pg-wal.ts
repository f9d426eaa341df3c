/** What the WAL of a Postgres database holds by relation (pg_walinspect), for tests and bench/diag-pg.ts's report. */
import type pg from 'pg';

/** What the WAL holds for one relation of the database: records, their bytes, and of an index its entries written. */
interface RelationWal {
  rel: string;
  records: number;
  bytes: number;
  /**
   * Btree leaf inserts, into a posting list or not, and the splits that took the new entry: about one per index
   * entry (a split of an upper-level page, which adds a downlink, not a leaf entry, counts too; such splits are rare).
   */
  entries: number;
}

/**
 * The WAL from `fromLsn` to now by relation of the connected database (pg_walinspect, which the caller has
 * created; flushed WAL only), most bytes first: an insert's and a non-HOT update's cost per index. Fails when
 * the WAL from `fromLsn` is no longer kept (a checkpoint since recycled its segments).
 */
export async function walByRelation(db: Pick<pg.Pool, 'query'> | Pick<pg.Client, 'query'>, fromLsn: string): Promise<RelationWal[]> {
  const { rows } = await db.query(
    `SELECT c.relname AS rel, count(*)::int AS records, sum(b.record_length)::bigint AS bytes,
            (count(*) FILTER (WHERE b.resource_manager = 'Btree'
                                AND split_part(b.record_type, ' ', 1) IN ('INSERT_LEAF', 'INSERT_POST', 'SPLIT_L', 'SPLIT_R')))::int AS entries
       FROM pg_get_wal_block_info($1::pg_lsn, pg_current_wal_lsn()) b
       JOIN pg_class c ON c.relfilenode = b.relfilenode AND c.relnamespace = 'public'::regnamespace
      WHERE b.block_id = 0 AND b.reldatabase = (SELECT oid FROM pg_database WHERE datname = current_database())
      GROUP BY 1 ORDER BY sum(b.record_length) DESC`,
    [fromLsn],
  );
  return rows.map((r) => ({ rel: String(r.rel), records: Number(r.records), bytes: Number(r.bytes), entries: Number(r.entries) }));
}
