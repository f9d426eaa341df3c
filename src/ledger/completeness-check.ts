/**
 * The completeness half of `combine ledger verify`, kept apart from the hash-chain walk: per work item
 * (from the entries, see domain/ledger-completeness.ts) and per thread (from the tables):
 *   - every prompt has a response or an error, unless its call is in flight now;
 *   - a mutation_report follows a recorded response of the same work item;
 *   - every applied work item has a mutation_report;
 *   - every complete thread with work items has an applied one.
 */
import type { Sql } from '../core/sql.js';
import { getLastLedgerEntryForWorkItem, getLatestLedgerEntrySeqForThread, listAppliedWithoutMutationReport } from './store.js';
import { listCompleteThreadsWithoutAppliedItem } from '../db/threads.js';
import { getWorkItem } from '../db/work-items.js';
import { CompletenessTracker, type CompletenessEntry, type IncompleteRecord } from './completeness.js';

export interface CompletenessCheck {
  /** Feed every entry, in chain order. */
  observe(e: CompletenessEntry): void;
  /** The holes, first (lowest seq) first. */
  finish(): Promise<IncompleteRecord[]>;
}

export function createCompletenessCheck(sql: Sql): CompletenessCheck {
  const tracker = new CompletenessTracker();
  return {
    observe: (e) => tracker.observe(e),
    async finish() {
      // The tracker asks synchronously about the items whose call it saw start; read those first.
      const running = new Set<string>();
      for (const id of tracker.startedWithoutAnswer()) if ((await getWorkItem(sql, id))?.status === 'running') running.add(id);
      const found = tracker.finish((id) => running.has(id));
      for (const id of await listAppliedWithoutMutationReport(sql)) {
        const last = await getLastLedgerEntryForWorkItem(sql, id);
        const item = (await getWorkItem(sql, id))!;
        found.push({ seq: last?.seq ?? null, thread_id: item.thread_id, work_item_id: id, reason: 'applied without a mutation_report entry' });
      }
      for (const threadId of await listCompleteThreadsWithoutAppliedItem(sql)) {
        found.push({
          seq: await getLatestLedgerEntrySeqForThread(sql, threadId),
          thread_id: threadId,
          work_item_id: null,
          reason: 'the thread is complete but none of its work items was applied',
        });
      }
      return found.sort((a, b) => (a.seq ?? Infinity) - (b.seq ?? Infinity));
    },
  };
}
