/**
 * The ledger append on Postgres answers one linked row per entry (ledger/store.ts `linkedRows`): a database
 * function that answers fewer rows (a migration out of step with this process) is named as that, with both
 * counts, on either path — appended in the closure (rolled back with it) or in the COMMIT's query (found
 * after the commit, never by running the closure again) — instead of a TypeError on a missing row.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { LedgerLinkMismatchError } from '../../src/core/errors.js';
import { insertThread } from '../../src/db/threads.js';
import { appendLedgerEntries, appendLedgerEntriesAtCommit, type NewLedgerEntry } from '../../src/ledger/store.js';
import { useTestWriter } from '../helpers/postgres.js';
import { testThreadRow } from '../helpers/rows.js';

const entry = (n: number): NewLedgerEntry => ({
  thread_id: 't-a',
  work_item_id: null,
  entry_type: 'prompt',
  attempt: 1,
  payload: { n },
  created_at: 5,
});

const ARGS = `thread_ids text[], work_item_ids text[], entry_types text[], attempts integer[], payloads text[],
  created_ats bigint[], meta_heads text[], meta_tails text[], content_digests text[]`;

describe('Postgres ledger append answering fewer rows than entries', () => {
  const db = useTestWriter(4);

  beforeAll(async () => {
    await insertThread(db.reader, testThreadRow('a'));
    // The real function kept under another name; the one the process calls drops its last linked row.
    await db.reader.run(`ALTER FUNCTION llm_ledger_append(${ARGS}) RENAME TO llm_ledger_append_real`);
    await db.reader.run(`CREATE FUNCTION llm_ledger_append(${ARGS})
      RETURNS TABLE (entry_seq bigint, entry_prev_hash text, entry_hash text) LANGUAGE sql AS $$
        SELECT * FROM llm_ledger_append_real(thread_ids, work_item_ids, entry_types, attempts, payloads, created_ats,
          meta_heads, meta_tails, content_digests) ORDER BY 1 LIMIT cardinality(thread_ids) - 1
      $$`);
  });

  const entries = () => db.reader.get<{ n: number }>('SELECT count(*)::int AS n FROM llm_ledger_entries');

  it('appended in the closure: the write fails naming both counts, and nothing of it stays', async () => {
    const write = db.writer.write((sql) => appendLedgerEntries(sql, [entry(1), entry(2)]));
    await expect(write).rejects.toBeInstanceOf(LedgerLinkMismatchError);
    await expect(write).rejects.toThrow('the ledger append linked 1 rows for 2 entries');
    expect(await entries()).toEqual({ n: 0 });
  });

  it('appended in the COMMIT query: the caller gets the mismatch once, the closure ran once', async () => {
    let runs = 0;
    const write = db.writer.write(async (sql) => {
      runs++;
      await appendLedgerEntriesAtCommit(sql, [entry(3), entry(4)], () => {}, undefined);
    });
    await expect(write).rejects.toThrow(LedgerLinkMismatchError);
    expect(runs).toBe(1);
    // Committed before the mismatch was found: both entries are in the chain (ledger verify reads them).
    expect(await entries()).toEqual({ n: 2 });
  });
});
