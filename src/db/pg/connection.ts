/**
 * Connecting to Postgres: one place for what every connection needs. int8 columns (times in ms, ledger
 * seqs, `count(*)`) and numeric values (`sum` of an int8 column) are read as JS numbers, as
 * better-sqlite3 reads SQLite integers, and booleans (`EXISTS (…)`, a comparison in a select list) as
 * 1 or 0, as SQLite returns them: both backends give the same rows. Our values stay far below 2^53.
 */
import type pg from 'pg';
import { pgDriver } from './driver.js';

const INT8_OID = 20;
const NUMERIC_OID = 1700;
const BOOL_OID = 16;

const toNumber = (value: string) => Number(value);
const toBit = (value: string) => (value === 't' ? 1 : 0);

/** Per-connection type parsers (not pg's global registry, which would change every user of `pg` in the process). */
export const PG_TYPES: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: 'text' | 'binary') => {
    if (oid === INT8_OID || oid === NUMERIC_OID) return toNumber;
    if (oid === BOOL_OID) return toBit;
    return pgDriver().types.getTypeParser(oid, format);
  }) as pg.CustomTypesConfig['getTypeParser'],
};

/** A server that does not answer within this time is unreachable (the default would wait forever). */
const CONNECT_TIMEOUT_MS = 10_000;

/** A pool of connections to `url` (postgres://…), with our type parsers. */
export function openPostgresPool(url: string, opts: { max?: number } = {}): pg.Pool {
  const { Pool } = pgDriver();
  return new Pool({ connectionString: url, types: PG_TYPES, max: opts.max ?? 10, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true });
}

/** One session (migrations and session-level advisory locks need the same connection throughout). */
export async function connectPostgres(url: string): Promise<pg.Client> {
  const { Client } = pgDriver();
  const client = new Client({ connectionString: url, types: PG_TYPES, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true });
  await client.connect();
  return client;
}
