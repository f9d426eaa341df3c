/**
 * The imported half of `combine ledger verify`: each imported entry, put back at its place in the
 * exporting home's chain (source seq and prev_hash), still hashes to the hash it had there. Together
 * with this home's own chain over the same bytes, that ties the entry to the record it was exported from.
 */
import type { Sql } from '../core/sql.js';
import { getLedgerEntry } from './store.js';
import { iterateLedgerImports } from './imports-store.js';
import { ledgerEntryHash } from './chain.js';

export interface ImportsReport {
  entries: number;
  first_mismatch: { seq: number; reason: string } | null;
}

export async function verifyImportedEntries(sql: Sql): Promise<ImportsReport> {
  let entries = 0;
  let firstMismatch: ImportsReport['first_mismatch'] = null;
  for await (const imp of iterateLedgerImports(sql)) {
    entries++;
    if (firstMismatch) continue;
    const e = await getLedgerEntry(sql, imp.seq);
    if (!e) firstMismatch = { seq: imp.seq, reason: 'an import record names an entry that does not exist' };
    else if (ledgerEntryHash({ ...e, seq: imp.source_seq, prev_hash: imp.source_prev_hash }) !== imp.source_hash) {
      firstMismatch = { seq: imp.seq, reason: `does not hash to ${imp.source_hash.slice(0, 12)}…, its hash as entry ${imp.source_seq} of the exporting home` };
    }
  }
  return { entries, first_mismatch: firstMismatch };
}
