/** llm_ledger_imports: where imported ledger entries came from (their place in the exporting chain). */
import type { Sql } from '../core/sql.js';
import type { LedgerImportRow } from '../db/schema.js';

export async function insertLedgerImport(sql: Sql, row: LedgerImportRow): Promise<void> {
  await sql.run(
    `INSERT INTO llm_ledger_imports (seq, import_id, source_seq, source_prev_hash, source_hash)
     VALUES (@seq, @import_id, @source_seq, @source_prev_hash, @source_hash)`,
    row,
  );
}

export async function hasImport(sql: Sql, importId: string): Promise<boolean> {
  return (await sql.get('SELECT 1 FROM llm_ledger_imports WHERE import_id = ? LIMIT 1', [importId])) !== undefined;
}

/** The import records of one thread's entries, by this home's seq. */
export async function listImportsForThread(sql: Sql, threadId: string): Promise<LedgerImportRow[]> {
  return (await sql.all(
    `SELECT i.* FROM llm_ledger_imports i JOIN llm_ledger_entries l ON l.seq = i.seq
     WHERE l.thread_id = ? ORDER BY i.seq`,
    [threadId],
  )) as LedgerImportRow[];
}

/** Every import record, in chain order, streamed (verify recomputes each source hash). */
export async function* iterateLedgerImports(sql: Sql): AsyncGenerator<LedgerImportRow> {
  for (let after = -1; ; ) {
    const page = await sql.all<LedgerImportRow>('SELECT * FROM llm_ledger_imports WHERE seq > ? ORDER BY seq LIMIT 1000', [after]);
    yield* page;
    if (page.length < 1000) return;
    after = page.at(-1)!.seq;
  }
}
