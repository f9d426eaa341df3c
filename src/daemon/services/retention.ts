/**
 * `combine prune --older-than <duration>`: removes closed threads (whole generate-all trees) with their
 * work items, mutations, telemetry and ledger entries. It works in batches, each one writer transaction,
 * so the engine's writes interleave with a long prune instead of waiting for all of it.
 *
 * The ledger is one global hash chain, and pruned threads' entries sit between entries that stay. For
 * each run of consecutive removed entries a checkpoint row keeps the hash before and after the run; the
 * database refuses to delete an entry no checkpoint covers, and `ledger verify` crosses each gap only
 * over checkpoints that link. See docs/design-notes.md "Retention".
 */
import { randomUUID } from 'node:crypto';
import {
  countWorkItemsOfThread,
  deleteChargesOfThread,
  deleteCheckpointedLedgerRun,
  deleteClosedThread,
  deleteLedgerImportsInRun,
  deleteMutationsOfThread,
  deleteWorkItemsOfThread,
  detachScheduleRunsFromThread,
  insertLedgerCheckpoint,
  listChildThreadIds,
  listLedgerLinksForThread,
  listPrunableRoots,
  type LedgerLink,
} from '../../db/retention.js';
import { splitIntoRuns } from '../../ledger/gaps.js';
import { lockKeyForTransaction } from '../../db/key-locks.js';
import type { Tx } from '../engine/tx.js';
import type { Maintenance } from '../runtime/maintenance.js';
import { StaleStateError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';

/** Trees per transaction: large enough to amortise the commit, small enough not to stall the engine. */
export const PRUNE_BATCH = 200;

export interface PruneTotals {
  threads: number;
  work_items: number;
  ledger_entries: number;
  checkpoints: number;
}

export interface PruneBatchResult extends PruneTotals {
  /** Roots this batch removed; fewer than the batch size means nothing older is left. */
  roots: number;
}

/** Counts what a prune would remove, without removing it (`--dry-run`). Reads in one pass. */
export async function previewPrune(tx: Pick<Tx, 'sql'>, cutoff: number): Promise<PruneTotals & { roots: number }> {
  const totals = { roots: 0, threads: 0, work_items: 0, ledger_entries: 0, checkpoints: 0 };
  const roots = await listPrunableRoots(tx.sql, cutoff, Number.MAX_SAFE_INTEGER);
  const links: LedgerLink[] = [];
  for (const root of roots) {
    for (const id of [...(await listChildThreadIds(tx.sql, root)), root]) {
      totals.threads++;
      totals.work_items += await countWorkItemsOfThread(tx.sql, id);
      links.push(...(await listLedgerLinksForThread(tx.sql, id)));
    }
  }
  totals.roots = roots.length;
  totals.ledger_entries = links.length;
  totals.checkpoints = splitIntoRuns(links).length;
  return totals;
}

/**
 * Removes up to `limit` prunable trees in the caller's transaction. Checkpoints are written before the
 * entries they cover are deleted (the delete trigger requires it); children go before their parent.
 */
export async function pruneBatch(tx: Tx, p: { cutoff: number; pruneId: string; limit: number }): Promise<PruneBatchResult> {
  // Daemons sharing a database prune one batch at a time: a second prune waits, then finds what the
  // first left (two batches choosing the same roots would checkpoint the same ledger runs twice).
  await lockKeyForTransaction(tx.sql, 'combine.prune');
  const roots = await listPrunableRoots(tx.sql, p.cutoff, p.limit);
  const threadIds: string[] = [];
  for (const root of roots) threadIds.push(...(await listChildThreadIds(tx.sql, root)), root);
  const links: LedgerLink[] = [];
  for (const id of threadIds) links.push(...(await listLedgerLinksForThread(tx.sql, id)));
  const runs = splitIntoRuns(links);
  let ledgerEntries = 0;
  for (const run of runs) {
    await insertLedgerCheckpoint(tx.sql, { ...run, prune_id: p.pruneId, cutoff_at: p.cutoff, created_at: tx.now });
    await deleteLedgerImportsInRun(tx.sql, run.from_seq, run.to_seq);
    ledgerEntries += await deleteCheckpointedLedgerRun(tx.sql, run.from_seq, run.to_seq);
  }
  let workItems = 0;
  for (const id of threadIds) {
    await deleteMutationsOfThread(tx.sql, id);
    await deleteChargesOfThread(tx.sql, id);
    await detachScheduleRunsFromThread(tx.sql, id);
    workItems += await deleteWorkItemsOfThread(tx.sql, id);
    if ((await deleteClosedThread(tx.sql, id)) !== 1) throw new StaleStateError(`thread ${id} is no longer closed`);
  }
  return { roots: roots.length, threads: threadIds.length, work_items: workItems, ledger_entries: ledgerEntries, checkpoints: runs.length };
}

/** A new prune's id (groups its checkpoints). */
export function newPruneId(): string {
  return randomUUID();
}

export interface PruneDeps {
  write<T>(fn: (tx: Tx) => T | Promise<T>): Promise<T>;
  /** What a prune at `cutoff` would remove (a long read: the daemon runs it off its event loop). */
  preview(cutoff: number): Promise<PruneTotals & { roots: number }>;
  logger: Logger;
  maintenance: Pick<Maintenance, 'run'>;
}

export interface PruneReport extends PruneTotals {
  dry_run: boolean;
  /** Closed before this instant. */
  cutoff: string;
  prune_id: string | null;
  /** Pages the incremental vacuum returned to the file system afterwards. */
  freed_pages: number;
}

/** Prunes in batches until nothing older than `cutoff` is left; each batch commits on its own. */
export async function runPrune(d: PruneDeps, cutoff: number, dryRun: boolean): Promise<PruneReport> {
  const base = { dry_run: dryRun, cutoff: new Date(cutoff).toISOString(), freed_pages: 0 };
  if (dryRun) {
    const { roots: _roots, ...preview } = await d.preview(cutoff);
    return { ...base, prune_id: null, ...preview };
  }
  const pruneId = newPruneId();
  const totals: PruneTotals = { threads: 0, work_items: 0, ledger_entries: 0, checkpoints: 0 };
  for (;;) {
    const r = await d.write((tx) => pruneBatch(tx, { cutoff, pruneId, limit: PRUNE_BATCH }));
    totals.threads += r.threads;
    totals.work_items += r.work_items;
    totals.ledger_entries += r.ledger_entries;
    totals.checkpoints += r.checkpoints;
    if (r.roots < PRUNE_BATCH) break;
  }
  const freed = totals.threads > 0 ? (await d.maintenance.run()).freed_pages : 0;
  d.logger.info({ component: 'retention', prune_id: pruneId, cutoff: base.cutoff, ...totals, freed_pages: freed }, `pruned ${totals.threads} closed threads`);
  return { ...base, prune_id: pruneId, ...totals, freed_pages: freed };
}
