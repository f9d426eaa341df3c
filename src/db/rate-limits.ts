/**
 * The rate limiter every daemon on one Postgres shares (`llm_rate_limits`, Postgres only): per route,
 * a requests/min and a tokens/min token bucket and the 429 park. Admission is one guarded UPDATE in the
 * claim's transaction: it refills the buckets for the time passed and takes one request and the call's
 * tokens only if both have them and the route is not parked; the row stays locked until the claim
 * commits, so daemons admitting for one route go one after another and together never exceed it.
 * Capacities come from each daemon's configuration (null: unlimited), not from the row.
 */
import type { Sql } from '../core/sql.js';
import { expectOneChange } from './statements.js';

export interface SharedRateRow {
  model: string;
  requests_level: number | null;
  tokens_level: number | null;
  updated_at: number;
  parked_until: number;
}

export type SharedRateTake = {
  model: string;
  now: number;
  /** Requests per minute (null: unlimited). */
  rpm: number | null;
  /** Tokens per minute (null: unlimited). */
  tpm: number | null;
  tokens: number;
};

// A bucket's level now: refilled at capacity/min since `updated_at` (never negatively: another daemon's
// clock may be a little ahead), at most the capacity; a null level is a full bucket, a null capacity none.
const REQUESTS_NOW =
  'least(CAST(@rpm AS float8), coalesce(requests_level, CAST(@rpm AS float8)) + greatest(0, CAST(@now AS int8) - updated_at) * CAST(@rpm AS float8) / 60000.0)';
const TOKENS_NOW =
  'least(CAST(@tpm AS float8), coalesce(tokens_level, CAST(@tpm AS float8)) + greatest(0, CAST(@now AS int8) - updated_at) * CAST(@tpm AS float8) / 60000.0)';
/** A call needs its tokens, or the whole bucket when it asks for more than the bucket holds. */
const TOKENS_NEEDED = 'least(CAST(@tokens AS float8), CAST(@tpm AS float8))';

/** Creates the route's row (full buckets, not parked) if no daemon has yet. */
export async function ensureSharedRateRow(sql: Sql, p: { model: string; now: number }): Promise<void> {
  await sql.run(
    `INSERT INTO llm_rate_limits (model, requests_level, tokens_level, updated_at, parked_until)
     VALUES (@model, NULL, NULL, @now, 0) ON CONFLICT (model) DO NOTHING`,
    p,
  );
}

/**
 * Admission: takes one request and `tokens` if the route is not parked and both buckets have them now.
 * Returns whether it did. Under READ COMMITTED a concurrent admission's UPDATE waits for this row's lock
 * and then re-evaluates the WHERE against the levels this one left.
 */
export async function takeSharedRate(sql: Sql, p: SharedRateTake): Promise<boolean> {
  const result = await sql.run(
    `UPDATE llm_rate_limits
     SET requests_level = ${REQUESTS_NOW} - 1, tokens_level = ${TOKENS_NOW} - ${TOKENS_NEEDED},
         updated_at = greatest(updated_at, CAST(@now AS int8))
     WHERE model = @model AND parked_until <= @now
       AND (CAST(@rpm AS float8) IS NULL OR ${REQUESTS_NOW} >= 1)
       AND (CAST(@tpm AS float8) IS NULL OR ${TOKENS_NOW} >= ${TOKENS_NEEDED})`,
    p,
  );
  return result.changes === 1;
}

/**
 * Puts back the request and `tokens` an admission took for a call that will not start, up to the
 * capacities: its claim was lost later in the same transaction, which commits, or its committed claim's
 * start made no call (then in a write of its own, which takes only this row: engine/claim-admissions.ts).
 * Guarded: the row the admission took from is there (no statement deletes a route's row).
 */
export async function giveBackSharedRate(sql: Sql, p: SharedRateTake): Promise<void> {
  const result = await sql.run(
    `UPDATE llm_rate_limits
     SET requests_level = least(CAST(@rpm AS float8), ${REQUESTS_NOW} + 1), tokens_level = least(CAST(@tpm AS float8), ${TOKENS_NOW} + ${TOKENS_NEEDED}),
         updated_at = greatest(updated_at, CAST(@now AS int8))
     WHERE model = @model`,
    p,
  );
  expectOneChange(result, `rate limit row ${p.model} is missing`);
}

export async function getSharedRateRow(sql: Sql, model: string): Promise<SharedRateRow | undefined> {
  return sql.get<SharedRateRow>('SELECT * FROM llm_rate_limits WHERE model = ?', [model]);
}

/** A 429 seen by any daemon: no daemon starts a call of the route before `until` (a later park wins). */
export async function parkSharedRate(sql: Sql, p: { model: string; until: number; now: number }): Promise<void> {
  await ensureSharedRateRow(sql, p);
  const result = await sql.run('UPDATE llm_rate_limits SET parked_until = greatest(parked_until, @until) WHERE model = @model', p);
  expectOneChange(result, `rate limit row ${p.model} is missing`);
}

/** `combine retry`: the user lifts the route's 429 hold for every daemon. */
export async function unparkSharedRate(sql: Sql, model: string): Promise<void> {
  await sql.run('UPDATE llm_rate_limits SET parked_until = 0 WHERE model = ?', [model]);
}
