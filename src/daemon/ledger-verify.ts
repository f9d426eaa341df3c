/**
 * `combine ledger verify`: the hash chain holds from the first entry to the last, and every thread's
 * record is complete (each prompt is answered by a response or an error unless its call is in flight
 * now; each applied work item has a mutation report).
 */
import type { Db } from '../db/connection.js';
import { iterateLedger, listAppliedWithoutMutationReport } from '../db/ledger.js';
import { listLedgerCheckpoints } from '../db/retention.js';
import { getWorkItem } from '../db/work-items.js';
import { GapBridge } from '../domain/ledger-gaps.js';
import { GENESIS_HASH, ledgerEntryHash } from '../domain/ledger-hash.js';

export interface VerifyReport {
  ok: boolean;
  entries: number;
  head_hash: string | null;
  /** The first entry whose link or contents do not verify. */
  first_break: { seq: number; reason: string } | null;
  incomplete: { work_item_id: string; reason: string }[];
  /** Entries removed by `combine prune`, whose gaps checkpoints bridge. */
  pruned_entries: number;
}

export function verifyLedger(db: Db): VerifyReport {
  let prev = GENESIS_HASH;
  let entries = 0;
  let expectedSeq = 1;
  let firstBreak: VerifyReport['first_break'] = null;
  /** Work items whose last prompt has no response or error yet. */
  const openPrompts = new Set<string>();
  const gaps = new GapBridge(listLedgerCheckpoints(db));
  for (const e of iterateLedger(db)) {
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
    if (e.work_item_id === null) continue;
    if (e.entry_type === 'prompt') openPrompts.add(e.work_item_id);
    else if (e.entry_type === 'response' || e.entry_type === 'error') openPrompts.delete(e.work_item_id);
  }
  const head = firstBreak ? null : gaps.cross(expectedSeq, null, prev);
  if (head?.ok) prev = head.hash;
  if (!firstBreak && gaps.unused > 0) firstBreak = { seq: expectedSeq, reason: `${gaps.unused} checkpoint(s) cover entries that still exist` };
  const incomplete: VerifyReport['incomplete'] = [];
  for (const id of openPrompts) {
    if (getWorkItem(db, id)?.status !== 'running') incomplete.push({ work_item_id: id, reason: 'a prompt has no response or error' });
  }
  for (const id of listAppliedWithoutMutationReport(db)) {
    incomplete.push({ work_item_id: id, reason: 'applied without a mutation_report entry' });
  }
  return {
    ok: firstBreak === null && incomplete.length === 0,
    entries,
    head_hash: entries > 0 || gaps.removed > 0 ? prev : null,
    first_break: firstBreak,
    incomplete,
    pruned_entries: gaps.removed,
  };
}
