/**
 * Prometheus metrics (prom-client) with bounded cardinality. Labels take values only from fixed sets
 * (statuses, entry types, error codes, outcomes) — never a thread, work item or project id — plus the
 * model name, which is capped at MAX_MODEL_LABELS distinct values (further models count as "other").
 * Every series is created at start (zero-valued), so the number of series never grows with traffic:
 * it is exactly `metricSeriesCount(models)` ≤ METRIC_SERIES_BOUND, however many threads run.
 */
import { PerformanceObserver } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Clock } from '../../core/clock.js';
import type { Sql } from '../../core/sql.js';
import { countThreadsByStatus } from '../../db/threads.js';
import { countQueuedDue, countWorkItemsByStatus } from '../../db/work-items.js';
import { LEDGER_ENTRY_TYPES } from '../../ledger/store.js';
import { costUsd, type ModelPrice } from '../../domain/budget.js';
import { parseCompletionEnvelope } from '../../domain/completion.js';
import { ERROR_CODES } from '../../domain/errors.js';
import { THREAD_STATUSES, WORK_ITEM_STATUSES } from '../../domain/states.js';
import type { BreakerState } from '../engine/breaker.js';
import type { EngineObserver } from '../engine/engine.js';
import type { CallOutcome } from '../engine/executor.js';
import type { EngineEvent } from '../engine/events.js';
import type { MaintenanceResult } from './maintenance.js';
import { walBytes } from './maintenance.js';
import type { CanaryService } from '../canary/service.js';
import { PRESSURE_SIGNALS, type PressureMonitor, type PressureSnapshot } from '../pressure/monitor.js';
import type { ModelRouter } from '../routing/router.js';

export const ATTEMPT_OUTCOMES = ['applied', 'retry', 'repair', 'escalate', 'dead_letter', 'canceled'] as const;
export const CALL_OUTCOMES = ['ok', 'error'] as const;
export const LIMITER_REASONS = ['slots_full', 'breaker_open'] as const;
export const RECOVERY_ACTIONS = ['requeued', 'resumed', 'interrupted', 'locks_released', 'parents_closed'] as const;
export const TOKEN_KINDS = ['prompt', 'completion'] as const;
export const BREAKER_STATE_VALUE: Record<BreakerState, number> = { closed: 0, half_open: 1, open: 2 };
export const MAX_MODEL_LABELS = 4;
export const OTHER_MODEL = 'other';

const CALL_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120];
const COMMIT_BUCKETS = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
/** A histogram's series per label set: one per bucket, +Inf, _sum and _count. */
const histogramSeries = (buckets: number[]) => buckets.length + 3;

/** The exact number of series for `models` model labels (≤ MAX_MODEL_LABELS + 1 with "other"), with or without cost. */
export function metricSeriesCount(models: number, withCost: boolean): number {
  return (
    THREAD_STATUSES.length + // combine_threads{status}
    WORK_ITEM_STATUSES.length + // combine_work_items{status}
    1 + // combine_queue_depth
    1 + // combine_calls_in_flight
    CALL_OUTCOMES.length * histogramSeries(CALL_BUCKETS) + // combine_call_duration_seconds{outcome}
    ATTEMPT_OUTCOMES.length + // combine_attempts_total{outcome}
    ERROR_CODES.length + // combine_failures_total{code}
    LEDGER_ENTRY_TYPES.length + // combine_ledger_entries_total{entry_type}
    models * TOKEN_KINDS.length + // combine_tokens_total{model,kind}
    (withCost ? models : 0) + // combine_cost_usd_total{model}
    1 + // combine_breaker_state
    LIMITER_REASONS.length + // combine_limiter_waits_total{reason}
    RECOVERY_ACTIONS.length + // combine_recoveries_total{action}
    histogramSeries(COMMIT_BUCKETS) + // combine_commit_seconds
    1 + // combine_wal_bytes
    2 + // combine_maintenance_runs_total, combine_maintenance_freed_pages_total
    PRESSURE_SIGNALS.length + // combine_pressure{signal}
    3 + // combine_cpu_busy_ratio, combine_memory_available_bytes, combine_battery_percent
    2 + // combine_canary_last_success_timestamp_seconds, combine_canary_latency_seconds
    1 // combine_gc_seconds_total
  );
}

/** The hard ceiling, whatever the configuration (120 series today). */
export const METRIC_SERIES_BOUND = metricSeriesCount(MAX_MODEL_LABELS + 1, true);

/** What the gauges read when scraped, and nothing more. */
export interface MetricsSource {
  threadsByStatus(): Promise<{ status: string; n: number }[]>;
  workItemsByStatus(): Promise<{ status: string; n: number }[]>;
  /** Queued work items due now. */
  queuedDue(): Promise<number>;
  inFlight(): number;
  /** The worst state of the endpoints' breakers. */
  breakerState(): BreakerState;
  walBytes(): number;
  pressure(): PressureSnapshot;
  canary(): { readonly lastSuccessAt: number | null; readonly lastLatencyMs: number | null };
}

/** The daemon's source: counts from the database (due as of the clock), the engine's calls, the router's breakers, the WAL file, pressure and the canary. */
export function daemonMetricsSource(
  sql: Sql,
  clock: Clock,
  parts: () => {
    readonly engine: { readonly inFlightCount: number };
    readonly router: ModelRouter;
    readonly pressure: PressureMonitor;
    readonly canary: CanaryService;
  },
  walPath: string,
): MetricsSource {
  return {
    threadsByStatus: () => countThreadsByStatus(sql),
    workItemsByStatus: () => countWorkItemsByStatus(sql),
    queuedDue: () => countQueuedDue(sql, clock.now()),
    inFlight: () => parts().engine.inFlightCount,
    breakerState: () => parts().router.worstBreakerState(),
    walBytes: () => walBytes(walPath),
    pressure: () => parts().pressure.snapshot(),
    canary: () => parts().canary,
  };
}

export class Metrics implements EngineObserver {
  readonly registry = new Registry();
  private readonly ledgerEntries: Counter<'entry_type'>;
  private readonly failures: Counter<'code'>;
  private readonly attempts: Counter<'outcome'>;
  private readonly callSeconds: Histogram<'outcome'>;
  private readonly tokens: Counter<'model' | 'kind'>;
  private readonly cost: Counter<'model'> | null;
  private readonly limiterWaits: Counter<'reason'>;
  private readonly recoveries: Counter<'action'>;
  private readonly commitSeconds: Histogram;
  private readonly maintenanceRuns: Counter;
  private readonly freedPages: Counter;
  private readonly models = new Set<string>();

  constructor(
    source: MetricsSource,
    /** Costs are counted only when the configuration has prices. */
    private readonly prices: Record<string, ModelPrice>,
    /** The routes' keys (`ModelRoute.key`): their token series exist from the start. */
    modelKeys: readonly string[],
  ) {
    const registers = [this.registry];
    // prom-client awaits an async collect(): the counts are read (on the reader) when scraped.
    const gauge = (name: string, help: string, read: () => number | Promise<number>) =>
      new Gauge({
        name,
        help,
        registers,
        async collect() {
          this.set(await read());
        },
      });
    new Gauge({
      name: 'combine_threads',
      help: 'Threads by status',
      labelNames: ['status'],
      registers,
      async collect() {
        const counts = new Map((await source.threadsByStatus()).map((r) => [r.status, r.n]));
        for (const s of THREAD_STATUSES) this.set({ status: s }, counts.get(s) ?? 0);
      },
    });
    new Gauge({
      name: 'combine_work_items',
      help: 'Work items by status',
      labelNames: ['status'],
      registers,
      async collect() {
        const counts = new Map((await source.workItemsByStatus()).map((r) => [r.status, r.n]));
        for (const s of WORK_ITEM_STATUSES) this.set({ status: s }, counts.get(s) ?? 0);
      },
    });
    gauge('combine_queue_depth', 'Queued work items that are due now (waiting for a call slot)', () => source.queuedDue());
    gauge('combine_calls_in_flight', 'Provider calls in flight', () => source.inFlight());
    gauge(
      'combine_breaker_state',
      'Provider circuit breakers, the worst of all endpoints: 0 closed, 1 half-open, 2 open',
      () => BREAKER_STATE_VALUE[source.breakerState()],
    );
    gauge('combine_wal_bytes', 'Size of the SQLite write-ahead log', () => source.walBytes());
    new Gauge({
      name: 'combine_pressure',
      help: 'Resource pressure in effect (1) by signal: cpu, memory, battery (bulk and scheduled work paused), wal (commands refused)',
      labelNames: ['signal'],
      registers,
      collect() {
        const active = source.pressure().active;
        for (const s of PRESSURE_SIGNALS) this.set({ signal: s }, active.includes(s) ? 1 : 0);
      },
    });
    // -1: not known (no reading yet, no battery).
    gauge('combine_cpu_busy_ratio', 'Busy share of all CPUs at the last pressure probe (-1: unknown)', () => source.pressure().cpu.busy ?? -1);
    gauge('combine_memory_available_bytes', 'MemAvailable at the last pressure probe (-1: unknown)', () => source.pressure().memory.available_bytes ?? -1);
    gauge('combine_battery_percent', 'Battery charge at the last pressure probe (-1: no battery)', () => source.pressure().battery.percent ?? -1);
    gauge('combine_canary_last_success_timestamp_seconds', 'When the last canary completed (0: none yet)', () => (source.canary().lastSuccessAt ?? 0) / 1000);
    gauge('combine_canary_latency_seconds', 'How long the last successful canary took, submit to applied (-1: none yet)', () => {
      const ms = source.canary().lastLatencyMs;
      return ms === null ? -1 : ms / 1000;
    });

    let gcCounted = gcSeconds();
    new Counter({
      name: 'combine_gc_seconds_total',
      help: "Time the daemon's JavaScript heap spent in garbage collection since start",
      registers,
      collect() {
        const total = gcSeconds();
        this.inc(total - gcCounted);
        gcCounted = total;
      },
    });

    this.callSeconds = labelled(
      new Histogram({ name: 'combine_call_duration_seconds', help: 'Provider call duration', labelNames: ['outcome'], buckets: CALL_BUCKETS, registers }),
      'outcome',
      CALL_OUTCOMES,
    );
    this.attempts = labelled(
      new Counter({ name: 'combine_attempts_total', help: 'Attempts by how they ended', labelNames: ['outcome'], registers }),
      'outcome',
      ATTEMPT_OUTCOMES,
    );
    this.failures = labelled(
      new Counter({ name: 'combine_failures_total', help: 'Failed attempts by error code', labelNames: ['code'], registers }),
      'code',
      ERROR_CODES,
    );
    this.ledgerEntries = labelled(
      new Counter({ name: 'combine_ledger_entries_total', help: 'Ledger entries appended, by type', labelNames: ['entry_type'], registers }),
      'entry_type',
      LEDGER_ENTRY_TYPES,
    );
    this.tokens = new Counter({ name: 'combine_tokens_total', help: 'Tokens used, by model and kind', labelNames: ['model', 'kind'], registers });
    this.cost =
      Object.keys(prices).length > 0
        ? new Counter({
            name: 'combine_cost_usd_total',
            help: 'Estimated cost in USD (the prices table of config.json), by model',
            labelNames: ['model'],
            registers,
          })
        : null;
    this.limiterWaits = labelled(
      new Counter({ name: 'combine_limiter_waits_total', help: 'Times due work waited for the limiter', labelNames: ['reason'], registers }),
      'reason',
      LIMITER_REASONS,
    );
    this.recoveries = labelled(
      new Counter({ name: 'combine_recoveries_total', help: 'Recovery scan actions', labelNames: ['action'], registers }),
      'action',
      RECOVERY_ACTIONS,
    );
    this.commitSeconds = new Histogram({ name: 'combine_commit_seconds', help: 'Duration of a group commit', buckets: COMMIT_BUCKETS, registers });
    this.commitSeconds.zero({});
    this.maintenanceRuns = new Counter({
      name: 'combine_maintenance_runs_total',
      help: 'Idle maintenance runs (WAL checkpoint, incremental vacuum)',
      registers,
    });
    this.freedPages = new Counter({
      name: 'combine_maintenance_freed_pages_total',
      help: 'Pages returned to the file system by incremental vacuum',
      registers,
    });
    // Every configured route has its label from the start (the first MAX_MODEL_LABELS; the rest share "other").
    for (const key of modelKeys) this.modelLabel(key);
  }

  /** The label for a model: its name for the first MAX_MODEL_LABELS models seen, then "other". */
  private modelLabel(model: string): string {
    if (!this.models.has(model)) {
      if (this.models.size >= MAX_MODEL_LABELS) model = OTHER_MODEL;
      if (!this.models.has(model)) {
        this.models.add(model);
        for (const kind of TOKEN_KINDS) this.tokens.inc({ model, kind }, 0);
        this.cost?.inc({ model }, 0);
      }
    }
    return model;
  }

  observeCommit(ms: number): void {
    this.commitSeconds.observe(ms / 1000);
  }

  observeEvent(e: EngineEvent): void {
    if (e.type !== 'ledger') return;
    this.ledgerEntries.inc({ entry_type: e.entry_type });
    if (e.entry_type === 'mutation_report') this.attempts.inc({ outcome: 'applied' });
    if (e.entry_type !== 'error') return;
    if (e.code) this.failures.inc({ code: e.code });
    if (e.next && (ATTEMPT_OUTCOMES as readonly string[]).includes(e.next)) this.attempts.inc({ outcome: e.next });
  }

  onCall(outcome: CallOutcome, model: string): void {
    this.callSeconds.observe({ outcome: outcome.kind === 'response' ? 'ok' : 'error' }, outcome.latencyMs / 1000);
    if (outcome.kind !== 'response') return;
    const envelope = parseCompletionEnvelope(outcome.bodyText);
    const usage = envelope.ok ? envelope.usage : null;
    if (!usage) return;
    const label = this.modelLabel(model);
    this.tokens.inc({ model: label, kind: 'prompt' }, usage.prompt_tokens);
    this.tokens.inc({ model: label, kind: 'completion' }, usage.completion_tokens);
    this.cost?.inc({ model: label }, costUsd(this.prices[model], usage.prompt_tokens, usage.completion_tokens));
  }

  onLimiterWait(reason: (typeof LIMITER_REASONS)[number]): void {
    this.limiterWaits.inc({ reason });
  }

  onRecovery(counts: Record<(typeof RECOVERY_ACTIONS)[number], number>): void {
    for (const action of RECOVERY_ACTIONS) if (counts[action] > 0) this.recoveries.inc({ action }, counts[action]);
  }

  onMaintenance(r: MaintenanceResult): void {
    this.maintenanceRuns.inc();
    this.freedPages.inc(r.freed_pages);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}

let gcTotalMs = 0;
let gcObserver: PerformanceObserver | null = null;
/** Seconds spent in GC by this process since the first call (one observer per process, never stopped: GC is process-wide). */
function gcSeconds(): number {
  if (!gcObserver) {
    gcObserver = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) gcTotalMs += e.duration;
    });
    gcObserver.observe({ entryTypes: ['gc'] });
  }
  return gcTotalMs / 1000;
}

/** Creates every series of a labelled metric at zero, so the series count is fixed from the start. */
function labelled<M extends Counter<L> | Histogram<L>, L extends string>(metric: M, label: L, values: readonly string[]): M {
  for (const v of values) {
    const labels = { [label]: v } as Record<L, string>;
    if (metric instanceof Histogram) metric.zero(labels);
    else (metric as Counter<L>).inc(labels, 0);
  }
  return metric;
}
