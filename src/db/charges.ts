/**
 * llm_charges: one row per provider call, reserved before the call and settled after it (see the
 * table's comment in schema.ts and the transition table in domain/states.ts). Every state change is
 * guarded by `status = 'reserved'` and its changed-row count checked, so a call is settled at most once,
 * and `response_seq` is unique, so one response is never counted twice.
 */
import type { Sql } from '../core/sql.js';
import type { ChargeRow } from './schema.js';
import { assertChargeTransition } from '../domain/states.js';
import { inThreadAndChildren } from './thread-and-children.js';
import { runAtCommit, runGuarded, runGuardedAtCommit, runGuardedAtCommitAlong } from './statements.js';

/** A charge as its reservation inserts it: the call's telemetry comes with the change that ends the call. */
export type ReservedCharge = Omit<ChargeRow, 'outcome' | 'http_status' | 'latency_ms' | 'provider_request_id'>;

/**
 * Inserts a reservation as one of the claim's last statements (`runAtCommit`: on Postgres in its COMMIT's
 * query, no round trip of its own): nothing later in the claim reads it, and budgets count the spend row
 * the reservation moves, not this one. A taken key (another open reservation of the item) fails the COMMIT
 * query, and the claim runs again as after any race (db/errors.ts `isConcurrentChange`).
 */
export function insertCharge(sql: Sql, row: ReservedCharge): Promise<void> {
  return runAtCommit(
    sql,
    `INSERT INTO llm_charges (id, work_item_id, thread_id, project_id, model, attempt, repair, status, day,
       reserved_tokens, reserved_cost_usd, prompt_tokens, completion_tokens, total_tokens, cost_usd, response_seq,
       created_at, settled_at)
     VALUES (@id, @work_item_id, @thread_id, @project_id, @model, @attempt, @repair, @status, @day,
       @reserved_tokens, @reserved_cost_usd, @prompt_tokens, @completion_tokens, @total_tokens, @cost_usd, @response_seq,
       @created_at, @settled_at)`,
    row,
  );
}

/** The work item's open reservation (at most one, by a partial unique index). */
export function getOpenCharge(sql: Sql, workItemId: string): Promise<ChargeRow | undefined> {
  return sql.get<ChargeRow>("SELECT * FROM llm_charges WHERE work_item_id = ? AND status = 'reserved'", [workItemId]);
}

/**
 * reserved → settled (usage known) or in_doubt (answered, but no usage): the response was recorded. The
 * same change writes the call's telemetry (outcome `ok`, HTTP status, latency, provider request id).
 * Run after the transaction appended the item's `response` entry (engine/ledger-append.ts `atEndAfterAppend`), as
 * one of its last statements (`runGuardedAtCommit`: on Postgres in the COMMIT's query, behind the append,
 * with no round trip while the chain head is held): `response_seq` is the item's latest `response` entry,
 * that one, found by the statement itself since on Postgres its seq is known only inside that query.
 * With `spend` (given only on a handle that runs statements in its COMMIT's query: engine/charges.ts
 * `settleAtEnd`), the project's spend moves in the same statement (`runGuardedAtCommitAlong`: the upsert a
 * CTE beside the guarded UPDATE, the settle's count checked as alone). It does not rely on which of the two
 * runs first (Postgres leaves the order of data-modifying CTEs unspecified): the charge row is the item's
 * own, changed only under the item's lock, which this transaction holds (engine/tx.ts LOCK ORDER 1 and 5),
 * so no transaction holding a spend row waits for it.
 */
export function settleChargeFromResponse(
  sql: Sql,
  p: {
    id: string;
    work_item_id: string;
    status: 'settled' | 'in_doubt';
    prompt_tokens: number | null;
    completion_tokens: number | null;
    total_tokens: number | null;
    cost_usd: number | null;
    http_status: number;
    latency_ms: number;
    provider_request_id: string | null;
    now: number;
  },
  spend?: ProjectSpendChange,
): Promise<void> {
  assertChargeTransition('reserved', p.status);
  const what = `charge ${p.id} is not reserved`;
  if (!spend) return runGuardedAtCommit(sql, SETTLE_FROM_RESPONSE, p, what);
  const spendParams = { project_id: spend.project_id, day: spend.day, spend_tokens: spend.tokens, spend_cost_usd: spend.cost_usd };
  return runGuardedAtCommitAlong(sql, SETTLE_FROM_RESPONSE, p, what, { text: ADD_PROJECT_SPEND_WITH_SETTLE, params: spendParams });
}

const SETTLE_FROM_RESPONSE = `UPDATE llm_charges
     SET status = @status, prompt_tokens = @prompt_tokens, completion_tokens = @completion_tokens, total_tokens = @total_tokens,
         cost_usd = @cost_usd, settled_at = @now, outcome = 'ok', http_status = @http_status, latency_ms = @latency_ms,
         provider_request_id = @provider_request_id,
         response_seq = (SELECT e.seq FROM llm_ledger_entries e WHERE e.work_item_id = @work_item_id AND e.entry_type = 'response' ORDER BY e.seq DESC LIMIT 1)
     WHERE id = @id AND status = 'reserved'`;

/** What is known of a call that ended without a recorded response. */
export interface FailedCall {
  /** The error's code (TIMEOUT, HTTP_500, …). */
  outcome: string;
  http_status: number | null;
  latency_ms: number;
}

/**
 * reserved → released (certainly not billed) or in_doubt (may have been billed): no response. A call
 * that was made and failed (`call`) leaves its telemetry on the row; null when none was made or its
 * outcome is unknown (a lease recovered after a crash).
 */
export function closeChargeWithoutResponse(sql: Sql, p: { id: string; status: 'released' | 'in_doubt'; now: number; call: FailedCall | null }): Promise<void> {
  assertChargeTransition('reserved', p.status);
  return runGuarded(
    sql,
    `UPDATE llm_charges SET status = @status, settled_at = @now, outcome = @outcome, http_status = @http_status, latency_ms = @latency_ms
     WHERE id = @id AND status = 'reserved'`,
    {
      id: p.id,
      status: p.status,
      now: p.now,
      outcome: p.call?.outcome ?? null,
      http_status: p.call?.http_status ?? null,
      latency_ms: p.call?.latency_ms ?? null,
    },
    `charge ${p.id} is not reserved`,
  );
}

/**
 * Moves a project's spend for one day by a delta (positive when a call is reserved, the difference when
 * it settles, negative when it is released), as one of the transaction's last statements (engine/charges.ts
 * `moveSpend`): on a handle that runs statements in its COMMIT's query (the Postgres writer's
 * `Sql.atCommit`) it goes there, so the spend row is locked only inside that query; elsewhere it runs
 * now. It needs no answer: an upsert changes its row whatever it held.
 */
export function addProjectSpendAtCommit(sql: Sql, p: ProjectSpendChange): Promise<void> {
  return runAtCommit(sql, ADD_PROJECT_SPEND, p);
}

/** A project's spend on one day moved by a delta (`addProjectSpendAtCommit`). */
type ProjectSpendChange = { project_id: string; day: string; tokens: number; cost_usd: number };

const projectSpendUpsert = (
  tokens: string,
  cost: string,
) => `INSERT INTO llm_project_spend (project_id, day, tokens, cost_usd) VALUES (@project_id, @day, ${tokens}, ${cost})
     ON CONFLICT (project_id, day) DO UPDATE
       SET tokens = llm_project_spend.tokens + excluded.tokens, cost_usd = llm_project_spend.cost_usd + excluded.cost_usd`;

const ADD_PROJECT_SPEND = projectSpendUpsert('@tokens', '@cost_usd');

/** `ADD_PROJECT_SPEND` beside a settle (`settleChargeFromResponse`), whose `@cost_usd` is the call's cost, not the delta. */
const ADD_PROJECT_SPEND_WITH_SETTLE = projectSpendUpsert('@spend_tokens', '@spend_cost_usd');

/**
 * What a project has spent or may have spent: settled calls at their usage, reserved and in-doubt calls
 * at their maximum; released calls count nothing. `day` null sums every day. Reads the running totals
 * (one row per day), not the call history. (`CAST(@day AS TEXT) IS NULL`: Postgres cannot type a
 * parameter from `IS NULL` alone.)
 */
export async function sumProjectSpend(sql: Sql, projectId: string, day: string | null): Promise<{ tokens: number; cost_usd: number }> {
  return (await sql.get(
    `SELECT coalesce(sum(tokens), 0) AS tokens, coalesce(sum(cost_usd), 0) AS cost_usd
     FROM llm_project_spend WHERE project_id = @projectId AND (CAST(@day AS TEXT) IS NULL OR day = @day)`,
    { projectId, day },
  )) as { tokens: number; cost_usd: number };
}

export interface UsageTotals {
  /** Calls that reached the provider and may have been billed (settled + in doubt). */
  calls: number;
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  cost_usd: number;
  /** Settled calls whose answer was not applied: retries of bad answers, repairs, failed threads. */
  wasted_calls: number;
  wasted_tokens: number;
  wasted_cost_usd: number;
  /** Calls whose outcome is unknown, counted at their reserved maximum. */
  in_doubt_calls: number;
  in_doubt_tokens: number;
  in_doubt_cost_usd: number;
  /** Calls in flight now, at their reserved maximum. */
  reserved_calls: number;
  reserved_tokens: number;
  /**
   * Calls whose model had no price: a settled one stores no cost, an in-doubt one reserved none. (A
   * model priced at exactly 0 reads as unpriced while in doubt: nothing is lost by saying so.)
   */
  unpriced_calls: number;
  unpriced_wasted_calls: number;
  unpriced_in_doubt_calls: number;
}

/**
 * The charges a usage sum reads, each with `applied`: 1 when a mutation applied its call's answer (the
 * mutation names it by `response_seq`; a replayed answer, by the original call's), else 0 — a settled
 * call not applied was wasted. `where` filters the charges (alias `c`).
 */
function chargesWithApplied(where: string): string {
  return `(SELECT c.*, CASE WHEN EXISTS (SELECT 1 FROM mutations m WHERE m.response_seq = c.response_seq) THEN 1 ELSE 0 END AS applied
     FROM llm_charges c ${where}) charges`;
}

const TOTALS_COLUMNS = `
  count(*) FILTER (WHERE status IN ('settled', 'in_doubt')) AS calls,
  coalesce(sum(CASE WHEN status = 'settled' THEN prompt_tokens END), 0) AS prompt_tokens,
  coalesce(sum(CASE WHEN status = 'settled' THEN completion_tokens END), 0) AS completion_tokens,
  coalesce(sum(CASE WHEN status = 'settled' THEN total_tokens END), 0) AS total_tokens,
  coalesce(sum(CASE WHEN status = 'settled' THEN cost_usd END), 0) AS cost_usd,
  count(*) FILTER (WHERE status = 'settled' AND applied = 0) AS wasted_calls,
  coalesce(sum(CASE WHEN status = 'settled' AND applied = 0 THEN total_tokens END), 0) AS wasted_tokens,
  coalesce(sum(CASE WHEN status = 'settled' AND applied = 0 THEN cost_usd END), 0) AS wasted_cost_usd,
  count(*) FILTER (WHERE status = 'in_doubt') AS in_doubt_calls,
  coalesce(sum(CASE WHEN status = 'in_doubt' THEN reserved_tokens END), 0) AS in_doubt_tokens,
  coalesce(sum(CASE WHEN status = 'in_doubt' THEN reserved_cost_usd END), 0) AS in_doubt_cost_usd,
  count(*) FILTER (WHERE status = 'reserved') AS reserved_calls,
  coalesce(sum(CASE WHEN status = 'reserved' THEN reserved_tokens END), 0) AS reserved_tokens,
  count(*) FILTER (WHERE (status = 'settled' AND cost_usd IS NULL) OR (status = 'in_doubt' AND reserved_cost_usd = 0)) AS unpriced_calls,
  count(*) FILTER (WHERE status = 'settled' AND applied = 0 AND cost_usd IS NULL) AS unpriced_wasted_calls,
  count(*) FILTER (WHERE status = 'in_doubt' AND reserved_cost_usd = 0) AS unpriced_in_doubt_calls`;

/** A thread's usage; for an orchestration, its children's too (one `IN` list: thread-and-children.ts). */
export async function sumThreadUsage(sql: Sql, threadId: string): Promise<UsageTotals> {
  return (await sql.get(
    `SELECT ${TOTALS_COLUMNS}
     FROM ${chargesWithApplied(`WHERE c.thread_id ${inThreadAndChildren('@id')}`)}`,
    { id: threadId },
  )) as UsageTotals;
}

/** Every call ever made: what `combine stats` counts, with the same definition of a call as `usage`. */
export async function sumAllUsage(sql: Sql): Promise<UsageTotals> {
  return (await sql.get(`SELECT ${TOTALS_COLUMNS} FROM ${chargesWithApplied('')}`)) as UsageTotals;
}

export type UsageRow = UsageTotals & { project_id: string; day: string };

/** Usage per project and UTC day, newest day first; `projectId` null for every project. */
export async function listUsageByProjectDay(sql: Sql, projectId: string | null): Promise<UsageRow[]> {
  return (await sql.all(
    `SELECT project_id, day, ${TOTALS_COLUMNS}
     FROM ${chargesWithApplied('WHERE CAST(@projectId AS TEXT) IS NULL OR c.project_id = @projectId')}
     GROUP BY project_id, day ORDER BY day DESC, project_id`,
    { projectId },
  )) as UsageRow[];
}

/** The settled cost of each of a thread's recorded responses, by the response's ledger seq. */
export async function listResponseCostsForThread(sql: Sql, threadId: string): Promise<{ response_seq: number; cost_usd: number | null }[]> {
  return (await sql.all('SELECT response_seq, cost_usd FROM llm_charges WHERE thread_id = ? AND response_seq IS NOT NULL', [threadId])) as {
    response_seq: number;
    cost_usd: number | null;
  }[];
}
