/**
 * A long ledger for the control-plane benchmark (target 8) and its test: for each of `threads` complete
 * threads already in the database (see `fillClosedThreads`), the four entries a paid, applied call
 * leaves — prompt, response, parse_report, mutation_report — chained with the ledger's own hash. A
 * set-up step, written with SQL in one transaction (through the daemon it would take minutes).
 */
import type { Db } from '../../src/db/connection.js';
import { canonicalJson } from '../../src/domain/canonical-json.js';
import { GENESIS_HASH, ledgerEntryHash } from '../../src/ledger/chain.js';

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

/** Appends 4 chained entries for each of the first `threads` applied work items; returns how many were written. */
export function fillLedger(db: Db, threads: number): number {
  const items = db.prepare(`SELECT id, thread_id, created_at FROM llm_work_items WHERE status = 'applied' ORDER BY rowid LIMIT ?`).all(threads) as {
    id: string;
    thread_id: string;
    created_at: number;
  }[];
  const head = db.prepare('SELECT seq, hash FROM llm_ledger_entries ORDER BY seq DESC LIMIT 1').get() as { seq: number; hash: string } | undefined;
  const insert = db.prepare(
    `INSERT INTO llm_ledger_entries (seq, thread_id, work_item_id, entry_type, attempt, payload, prev_hash, hash, created_at)
     VALUES (@seq, @thread_id, @work_item_id, @entry_type, @attempt, @payload, @prev_hash, @hash, @created_at)`,
  );
  const payloads = ENTRIES.map(([type, p]) => [type, canonicalJson(p)] as const);
  let seq = head?.seq ?? 0;
  let prev = head?.hash ?? GENESIS_HASH;
  db.transaction(() => {
    for (const item of items) {
      for (const [entry_type, payload] of payloads) {
        const row = {
          seq: ++seq,
          thread_id: item.thread_id,
          work_item_id: item.id,
          entry_type,
          attempt: 1,
          payload,
          prev_hash: prev,
          created_at: item.created_at,
        };
        const hash = ledgerEntryHash(row);
        insert.run({ ...row, hash });
        prev = hash;
      }
    }
  })();
  return items.length * ENTRIES.length;
}
