/**
 * The engine's leases over time: the heartbeat that renews the leases (and lock scopes) of the items
 * this daemon runs, and the recovery scan that takes over the leases of items whose worker is gone
 * (rescuer.ts holds the scan's steps; this runs them, on an interval and at start). Neither holds
 * anything that matters for correctness: the leases are rows, and a scan missed is made by the next.
 */
import type { Sql } from '../../core/sql.js';
import type { Logger } from '../../core/logger.js';
import { InfraError } from '../../core/errors.js';
import type { LedgerRow, WorkItemRow } from '../../db/schema.js';
import { getWorkItemWithThread } from '../../db/item-with-thread.js';
import { lockLeaseIfUnchanged } from '../../db/leases.js';
import type { EngineContext } from './leased.js';
import { extendLeases, lockStaleLeases, RESCUE_BATCH, type RescueResult, rescueLeases, sweepLocksAndParents } from './rescuer.js';
import type { Write } from './tx.js';

/** What one recovery scan did, for metrics. */
export interface RecoveryCounts {
  requeued: number;
  resumed: number;
  interrupted: number;
  locks_released: number;
  parents_closed: number;
}

/** An item this daemon runs now, as the heartbeat needs it. */
export interface LeaseHeld {
  lockScope: string;
  /** Log lines about this item carry its thread_id, work_item_id and trace_id. */
  log: () => Logger;
}

export interface LeaseUpkeepDeps {
  reader: Sql;
  write: Write;
  ctx: EngineContext;
  /** See EngineOptions `exclusive` and `homePrefix`: which leases the start-up scan takes. */
  exclusive: boolean;
  homePrefix: string;
  leaseMs: number;
  /** The items this daemon runs now, by id: never taken over by its own scan. */
  inFlight: ReadonlyMap<string, LeaseHeld>;
  /** Runs an item the scan leased to this daemon with its recorded answer. */
  resume: (item: { id: string; thread_id: string; lock_scope: string }, response: LedgerRow, traceparent: string | null) => void;
  wake: () => void;
  stopped: () => boolean;
  onRecovery?: (counts: RecoveryCounts) => void;
  log: Logger;
}

export class LeaseUpkeep {
  constructor(private readonly d: LeaseUpkeepDeps) {}

  /** Extends the leases (and epic locks) of every in-flight item in one write. */
  async heartbeat(): Promise<void> {
    const { d } = this;
    if (d.inFlight.size === 0) return;
    const items = [...d.inFlight.entries()].map(([id, f]) => ({ id, lockScope: f.lockScope }));
    try {
      const lost = await d.write((tx) => extendLeases(tx, d.ctx.owner, items, tx.now + d.leaseMs));
      for (const id of lost) (d.inFlight.get(id)?.log() ?? d.log).warn('lease lost while the item was in flight');
    } catch (err) {
      d.log.error({ err }, 'lease heartbeat failed');
    }
  }

  /**
   * The recovery scan: takes over the leases of items whose worker is gone (rescuer.ts) and sweeps
   * orphaned locks and finished orchestrations. Which leases count as gone: see `staleLeases`. On a
   * shared database a full batch means more may have expired: it scans again at once.
   */
  async recover(startup: boolean, throwOnFailure = false): Promise<void> {
    const { d } = this;
    try {
      let stale: WorkItemRow[] = [];
      const result = await d
        .write(async (tx) => {
          stale = await lockStaleLeases(tx, { startup, exclusive: d.exclusive, owner: d.ctx.owner, homePrefix: d.homePrefix, inFlight: d.inFlight });
          return { scanned: stale.length, ...(await rescueLeases(tx, d.ctx, stale, d.leaseMs)), ...(await sweepLocksAndParents(tx)) };
        })
        .catch(async (err: unknown) => {
          // One item whose rescue fails every time (a value storage refuses) would roll the whole batch back
          // on every round: no other expired lease rescued, no sweep. Each is rescued alone instead (even a
          // lone one, so the sweep still runs in a write of its own).
          if (err instanceof InfraError || stale.length === 0) throw err;
          d.log.error({ err }, 'recovery scan failed; rescuing its items one by one');
          return await this.rescueEach(stale);
        });
      for (const r of result.resume) {
        const read = await getWorkItemWithThread(d.reader, r.itemId);
        if (read) d.resume(read.item, r.response, read.thread.traceparent ?? null);
      }
      const { resume, ...counts } = result;
      d.onRecovery?.({
        requeued: counts.requeued,
        resumed: resume.length,
        interrupted: counts.interrupted,
        locks_released: counts.locksReleased.length,
        parents_closed: counts.parentsClosed,
      });
      if (counts.scanned > 0 || counts.locksReleased.length > 0 || counts.parentsClosed > 0) {
        d.log.info({ ...counts, resumed: resume.length, startup }, 'recovery scan');
      }
      d.wake();
      // A full batch of which some were taken: more may have expired (a batch all deferred would loop).
      if (!d.exclusive && counts.scanned === RESCUE_BATCH && counts.deferred < counts.scanned && !d.stopped()) await this.recover(startup, throwOnFailure);
    } catch (err) {
      if (throwOnFailure) throw err;
      d.log.error({ err }, 'recovery scan failed');
    }
  }

  /**
   * The scan's items each rescued in a write of its own, then the sweep in one more. An item whose rescue
   * fails (not storage trouble, which is thrown) is logged and left for a later scan, counted deferred so
   * a batch of only such items does not loop; the others are rescued.
   */
  private async rescueEach(stale: WorkItemRow[]): Promise<RescueResult & { scanned: number } & Awaited<ReturnType<typeof sweepLocksAndParents>>> {
    const { d } = this;
    const total: RescueResult = { resume: [], requeued: 0, interrupted: 0, held: 0, deferred: 0 };
    for (const scanned of stale) {
      try {
        const one = await d.write(async (tx) => {
          const item = await lockLeaseIfUnchanged(tx.sql, scanned);
          return item ? await rescueLeases(tx, d.ctx, [item], d.leaseMs) : null;
        });
        if (!one) continue;
        total.resume.push(...one.resume);
        total.requeued += one.requeued;
        total.interrupted += one.interrupted;
        total.held += one.held;
        total.deferred += one.deferred;
      } catch (err) {
        if (err instanceof InfraError) throw err;
        total.deferred++;
        d.log.error(
          { err, thread_id: scanned.thread_id, work_item_id: scanned.id },
          'the rescue of an expired lease failed; it is tried again at the next scan',
        );
      }
    }
    return { scanned: stale.length, ...total, ...(await d.write((tx) => sweepLocksAndParents(tx))) };
  }
}
