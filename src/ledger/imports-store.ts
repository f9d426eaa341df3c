/** llm_ledger_imports: where imported ledger entries came from (their place in the exporting chain). */
import type { Db } from '../db/connection.js';
import type { LedgerImportRow } from '../db/schema.js';
import { prepared } from '../db/statements.js';

export function insertLedgerImport(db: Db, row: LedgerImportRow): void {
  prepared(
    db,
    `INSERT INTO llm_ledger_imports (seq, import_id, source_seq, source_prev_hash, source_hash)
     VALUES (@seq, @import_id, @source_seq, @source_prev_hash, @source_hash)`,
  ).run(row);
}

export function hasImport(db: Db, importId: string): boolean {
  return prepared(db, 'SELECT 1 FROM llm_ledger_imports WHERE import_id = ? LIMIT 1').get(importId) !== undefined;
}

/** The import records of one thread's entries, by this home's seq. */
export function listImportsForThread(db: Db, threadId: string): LedgerImportRow[] {
  return prepared(
    db,
    `SELECT i.* FROM llm_ledger_imports i JOIN llm_ledger_entries l ON l.seq = i.seq
     WHERE l.thread_id = ? ORDER BY i.seq`,
  ).all(threadId) as LedgerImportRow[];
}

/** Every import record, in chain order, streamed (verify recomputes each source hash). */
export function iterateLedgerImports(db: Db): IterableIterator<LedgerImportRow> {
  return prepared(db, 'SELECT * FROM llm_ledger_imports ORDER BY seq').iterate() as IterableIterator<LedgerImportRow>;
}
