/**
 * A home written before the call records were merged into the charges (SQLite migration 0017, Postgres
 * 0011), in portable SQL: one thread whose first work item made three calls — an answer applied later
 * by a replay in the second work item, a rejected answer (wasted), an HTTP 500 — and a call record of
 * a call made before charges existed. `EXPECTED_*` is what the migration makes of it.
 */
export const OLD_HOME = [
  "INSERT INTO projects (id, name, created_at) VALUES ('p1', 'P', 1)",
  `INSERT INTO llm_threads (id, kind, space_type, space_id, target_ref, status, idempotency_key, created_at)
   VALUES ('t1', 'story_generate_epic', 'project', 'p1', '{}', 'complete', 'key-1', 1)`,
  `INSERT INTO llm_work_items (id, thread_id, sequence, status, lock_scope, project_id, not_before, created_at)
   VALUES ('w1', 't1', 1, 'dead_letter', 'epic:p1:E1', 'p1', 1, 1), ('w2', 't1', 2, 'applied', 'epic:p1:E1', 'p1', 1, 2)`,
  "INSERT INTO documents (id, project_id, doc_type, version, content, updated_at) VALUES ('d1', 'p1', 'story_backlog', 1, '{}', 1)",
  `INSERT INTO llm_charges (id, work_item_id, thread_id, project_id, model, attempt, repair, status, day, reserved_tokens,
     reserved_cost_usd, total_tokens, response_seq, applied, created_at, settled_at)
   VALUES ('c1', 'w1', 't1', 'p1', 'm', 1, 0, 'settled', '2026-11-25', 100, 0, 60, 10, 1, 90, 100),
          ('c2', 'w1', 't1', 'p1', 'm', 1, 1, 'settled', '2026-11-25', 100, 0, 70, 11, 0, 150, 200),
          ('c3', 'w1', 't1', 'p1', 'm', 2, 0, 'released', '2026-11-25', 100, 0, NULL, NULL, 0, 250, 300)`,
  `INSERT INTO llm_call_records (thread_id, work_item_id, model, outcome, http_status, latency_ms, total_tokens, provider_request_id, created_at)
   VALUES ('t1', 'w1', 'm', 'ok', 200, 1200, 60, 'req-a', 100), ('t1', 'w1', 'm', 'ok', 200, 900, 70, 'req-b', 200),
          ('t1', 'w1', 'm', 'HTTP_500', 500, 50, NULL, NULL, 300), ('t1', 'w1', 'm', 'ok', 200, 10, 5, 'req-old', 50)`,
  `INSERT INTO mutations (id, work_item_id, thread_id, document_id, from_version, to_version, summary, created_at)
   VALUES ('m1', 'w2', 't1', 'd1', 0, 1, '{}', 400)`,
];

/** The charges' telemetry after the migration, by id: each from the call record of its settle or close. */
export const EXPECTED_CHARGES = [
  { id: 'c1', outcome: 'ok', http_status: 200, latency_ms: 1200, provider_request_id: 'req-a' },
  { id: 'c2', outcome: 'ok', http_status: 200, latency_ms: 900, provider_request_id: 'req-b' },
  { id: 'c3', outcome: 'HTTP_500', http_status: 500, latency_ms: 50, provider_request_id: null },
];

export const EXPECTED_CHARGES_SQL = 'SELECT id, outcome, http_status, latency_ms, provider_request_id FROM llm_charges ORDER BY id';

/** The replayed answer's mutation names the original call's response; c2 alone stays wasted. */
export const EXPECTED_USAGE = { calls: 2, wasted_calls: 1, wasted_tokens: 70, total_tokens: 130 };
