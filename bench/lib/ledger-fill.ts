/**
 * A long ledger for the control-plane benchmark (target 8) and its test: for each of `threads` complete
 * threads already in the database (see `fillClosedThreads`), the four entries a paid, applied call
 * leaves — prompt, response, parse_report, mutation_report — chained with the ledger's own hash. A
 * set-up step, written with SQL in a few transactions (through the daemon it would take minutes).
 */
import type { Sql } from '../../src/core/sql.js';
import { appendLedgerEntries } from '../../src/ledger/store.js';

const PROMPT = {
  request: {
    model: 'bench',
    messages: [
      { role: 'system', content: 'You write user stories as JSON.' },
      { role: 'user', content: 'Epic id: E1\nTitle: Epic 1\nWhat epic 1 is about.' },
    ],
  },
  attempt: 1,
};
const RESPONSE = {
  http_status: 200,
  body: { choices: [{ message: { content: '{"stories":[{"title":"A story","description":"What it does.","acceptance_criteria":["it works"]}]}' } }] },
  usage: { prompt_tokens: 120, completion_tokens: 80, total_tokens: 200 },
};
const PARSE = { ok: true, errors: [] };
const MUTATION = { doc_type: 'story_backlog', version_before: 1, version_after: 2, summary: { stories_added: 1 } };
const ENTRIES = [
  ['prompt', PROMPT],
  ['response', RESPONSE],
  ['parse_report', PARSE],
  ['mutation_report', MUTATION],
] as const;

/**
 * Appends 4 chained entries for each of the first `threads` applied work items, through the ledger's
 * own append (either backend; the daemon stopped); returns how many were written.
 */
export async function fillLedger(sql: Sql, threads: number): Promise<number> {
  const items = await sql.all<{ id: string; thread_id: string; created_at: number }>(
    `SELECT id, thread_id, created_at FROM llm_work_items WHERE status = 'applied' ORDER BY created_at, id LIMIT ?`,
    [threads],
  );
  const entries = items.flatMap((item) =>
    ENTRIES.map(([entry_type, payload]) => ({
      thread_id: item.thread_id,
      work_item_id: item.id,
      entry_type,
      attempt: 1,
      payload,
      created_at: item.created_at,
    })),
  );
  // One transaction per batch keeps a million entries' statements from piling up in one.
  for (let i = 0; i < entries.length; i += BATCH) {
    await sql.run('BEGIN');
    await appendLedgerEntries(sql, entries.slice(i, i + BATCH));
    await sql.run('COMMIT');
  }
  return entries.length;
}

const BATCH = 50_000;
