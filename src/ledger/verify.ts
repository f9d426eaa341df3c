/**
 * `combine ledger verify`: the hash chain holds from the first entry to the last (crossing the gaps
 * `combine prune` left only over checkpoints that link), and every thread's record is complete
 * (ledger-completeness.ts). A report names the first entry that does not verify.
 */
import type { Sql } from '../core/sql.js';
import { iterateLedger } from './store.js';
import { listLedgerCheckpoints } from '../db/retention.js';
import { GapBridge } from './gaps.js';
import { GENESIS_HASH, ledgerEntryHash } from './chain.js';
import type { IncompleteRecord } from './completeness.js';
import { createCompletenessCheck } from './completeness-check.js';
import { verifyImportedEntries, type ImportsReport } from './imports-verify.js';

export interface VerifyReport {
  ok: boolean;
  entries: number;
  head_hash: string | null;
  /** The first entry whose link or contents do not verify. */
  first_break: { seq: number; reason: string } | null;
  /** Holes in threads' records, in chain order (`seq`: the entry that shows the hole). */
  incomplete: IncompleteRecord[];
  /** Entries imported from another home, checked against their hashes there. */
  imported: ImportsReport;
  /** Entries removed by `combine prune`, whose gaps checkpoints bridge. */
  pruned_entries: number;
}

export async function verifyLedger(sql: Sql): Promise<VerifyReport> {
  let prev = GENESIS_HASH;
  let entries = 0;
  let expectedSeq = 1;
  let firstBreak: VerifyReport['first_break'] = null;
  const completeness = await createCompletenessCheck(sql);
  const gaps = new GapBridge(await listLedgerCheckpoints(sql));
  for await (const e of iterateLedger(sql)) {
    entries++;
    if (!firstBreak && e.seq !== expectedSeq) {
      const crossed = gaps.cross(expectedSeq, e.seq, prev);
      if (crossed.ok) prev = crossed.hash;
      else firstBreak = { seq: e.seq, reason: crossed.reason };
    }
    if (!firstBreak) {
      if (e.prev_hash !== prev) firstBreak = { seq: e.seq, reason: 'prev_hash does not match the previous entry' };
      else if (ledgerEntryHash(e) !== e.hash) firstBreak = { seq: e.seq, reason: 'hash does not match the entry contents' };
    }
    prev = e.hash;
    expectedSeq = e.seq + 1;
    completeness.observe(e);
  }
  // A prune may have removed the newest entries too: the chain head is then the last checkpoint's hash.
  const head = firstBreak ? null : gaps.cross(expectedSeq, null, prev);
  if (head?.ok) prev = head.hash;
  if (!firstBreak && gaps.unused > 0) firstBreak = { seq: expectedSeq, reason: `${gaps.unused} checkpoint(s) cover entries that still exist` };
  const incomplete = await completeness.finish();
  const imported = await verifyImportedEntries(sql);
  return {
    ok: firstBreak === null && incomplete.length === 0 && imported.first_mismatch === null,
    entries,
    head_hash: entries > 0 || gaps.removed > 0 ? prev : null,
    first_break: firstBreak,
    incomplete,
    imported,
    pruned_entries: gaps.removed,
  };
}
