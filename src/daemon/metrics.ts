/**
 * Prometheus metrics (prom-client), with bounded cardinality: labels take values only from fixed sets
 * (statuses, entry types, error codes), never thread or work item ids. Bound: see METRIC_SERIES_BOUND.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { countThreadsByStatus } from '../db/threads.js';
import { countWorkItemsByStatus } from '../db/work-items.js';
import { ERROR_CODES } from '../domain/errors.js';
import { THREAD_STATUSES, WORK_ITEM_STATUSES } from '../domain/states.js';
import type { App } from './app.js';
import type { EngineEvent } from './events.js';

/** Threads (5) + work items (6) + ledger entry types (5) + failure codes (13) + gauges and histograms. */
export const METRIC_SERIES_BOUND = 5 + 6 + 5 + ERROR_CODES.length + 2 + 2 * 15;

export class Metrics {
  readonly registry = new Registry();
  private readonly ledgerEntries: Counter<'entry_type'>;
  private readonly failures: Counter<'code'>;
  private readonly commitSeconds: Histogram;

  constructor(app: App) {
    const registry = this.registry;
    new Gauge({
      name: 'combine_threads',
      help: 'Threads by status',
      labelNames: ['status'],
      registers: [registry],
      collect() {
        const counts = new Map(countThreadsByStatus(app.db).map((r) => [r.status, r.n]));
        for (const s of THREAD_STATUSES) this.set({ status: s }, counts.get(s) ?? 0);
      },
    });
    new Gauge({
      name: 'combine_work_items',
      help: 'Work items by status (queued = queue depth)',
      labelNames: ['status'],
      registers: [registry],
      collect() {
        const counts = new Map(countWorkItemsByStatus(app.db).map((r) => [r.status, r.n]));
        for (const s of WORK_ITEM_STATUSES) this.set({ status: s }, counts.get(s) ?? 0);
      },
    });
    new Gauge({
      name: 'combine_calls_in_flight',
      help: 'Provider calls in flight',
      registers: [registry],
      collect() {
        this.set(app.engine.inFlightCount);
      },
    });
    this.ledgerEntries = new Counter({
      name: 'combine_ledger_entries_total',
      help: 'Ledger entries appended, by type',
      labelNames: ['entry_type'],
      registers: [registry],
    });
    this.failures = new Counter({
      name: 'combine_failures_total',
      help: 'Failed attempts by error code',
      labelNames: ['code'],
      registers: [registry],
    });
    this.commitSeconds = new Histogram({
      name: 'combine_commit_seconds',
      help: 'Duration of a group commit',
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    });
  }

  observeCommit(ms: number): void {
    this.commitSeconds.observe(ms / 1000);
  }

  observeEvent(e: EngineEvent): void {
    if (e.type !== 'ledger') return;
    this.ledgerEntries.inc({ entry_type: e.entry_type });
    if (e.entry_type === 'error' && e.code) this.failures.inc({ code: e.code });
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
