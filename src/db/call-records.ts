/** llm_call_records: telemetry for operators. Execution never reads it for correctness. */
import type { Db } from './connection.js';
import type { CallRecordRow } from './schema.js';
import { prepared } from './statements.js';

export function insertCallRecord(db: Db, row: Omit<CallRecordRow, 'id'>): void {
  prepared(
    db,
    `INSERT INTO llm_call_records (thread_id, work_item_id, model, outcome, http_status, latency_ms, prompt_tokens,
       completion_tokens, total_tokens, provider_request_id, created_at)
     VALUES (@thread_id, @work_item_id, @model, @outcome, @http_status, @latency_ms, @prompt_tokens,
       @completion_tokens, @total_tokens, @provider_request_id, @created_at)`,
  ).run(row);
}
