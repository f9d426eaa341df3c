/**
 * Connecting to Postgres: one place for what every connection needs. int8 columns (times in ms, ledger
 * seqs) are read as JS numbers, as better-sqlite3 reads SQLite integers, so both backends return the
 * same row types; our int8 values stay far below 2^53.
 */
import pg from 'pg';

const INT8_OID = 20;

/** Per-connection type parsers (not pg's global registry, which would change every user of `pg` in the process). */
export const PG_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
    oid === INT8_OID ? (value: string) => Number(value) : pg.types.getTypeParser(oid, format)) as pg.CustomTypesConfig['getTypeParser'],
};

/** A pool of connections to `url` (postgres://…), with our type parsers. */
export function openPostgresPool(url: string, opts: { max?: number } = {}): pg.Pool {
  return new pg.Pool({ connectionString: url, types: PG_TYPES, max: opts.max ?? 10 });
}

/** One session (migrations and session-level advisory locks need the same connection throughout). */
export async function connectPostgres(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, types: PG_TYPES });
  await client.connect();
  return client;
}
