/** The plans a Postgres connection made for one of its prepared statements (pg_prepared_statements). */
import type { PgSql } from '../../src/db/pg/sql.js';

export interface PreparedPlans {
  /** Generic and custom plans made so far, read before the EXPLAIN below (which plans once more). */
  generic: number;
  custom: number;
  /** `EXPLAIN (COSTS OFF) EXECUTE` of the statement with `args` (NULL parameters by default): the plan the
   *  connection uses now (its generic plan once it keeps one), one line per node. */
  plan: string;
}

/**
 * The prepared statement of `sql`'s connection whose text has `marker`: its plan counts, then its plan for
 * `args` (SQL literals in the order the statement's parameters are numbered; every one NULL when omitted).
 */
export async function preparedPlansOf(sql: PgSql, marker: string, args?: string): Promise<PreparedPlans> {
  const row = await sql.get<{ name: string; generic_plans: number; custom_plans: number; params: number }>(
    'SELECT name, generic_plans, custom_plans, cardinality(parameter_types) AS params FROM pg_prepared_statements WHERE strpos(statement, ?) > 0',
    [marker],
  );
  if (!row) throw new Error(`no prepared statement with ${marker}`);
  const literals = args ?? Array.from({ length: row.params }, () => 'NULL').join(', ');
  const plan = await sql.all<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) EXECUTE ${row.name}(${literals})`);
  return { generic: Number(row.generic_plans), custom: Number(row.custom_plans), plan: plan.map((r) => r['QUERY PLAN']).join('\n') };
}
