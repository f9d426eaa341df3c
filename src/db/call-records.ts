/** llm_call_records: telemetry for operators. Execution never reads it for correctness. */
import type { Sql } from '../core/sql.js';
import type { CallRecordRow } from './schema.js';
import { runStatement } from './statements.js';

export function insertCallRecord(sql: Sql, row: Omit<CallRecordRow, 'id'>): Promise<void> {
  return runStatement(
    sql,
    `INSERT INTO llm_call_records (thread_id, work_item_id, model, outcome, http_status, latency_ms, prompt_tokens,
       completion_tokens, total_tokens, provider_request_id, created_at)
     VALUES (@thread_id, @work_item_id, @model, @outcome, @http_status, @latency_ms, @prompt_tokens,
       @completion_tokens, @total_tokens, @provider_request_id, @created_at)`,
    row,
  );
}
