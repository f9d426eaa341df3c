/**
 * The admin service: the daemon's own state — status, health, stats, metrics, usage and budgets, the
 * effective configuration — and retention (`combine prune`).
 */
import type { Clock } from '../../core/clock.js';
import { VERSION } from '../../core/version.js';
import type { Logger } from '../../core/logger.js';
import { sumAllUsage } from '../../db/charges.js';
import type { Sql } from '../../core/sql.js';
import { countThreadsByStatus } from '../../db/threads.js';
import { countWorkItemsByStatus } from '../../db/work-items.js';
import { countLedgerEntries } from '../../ledger/store.js';
import type { DaemonConfig } from '../config/config.js';
import type { Engine } from '../engine/engine.js';
import type { Write } from '../engine/tx.js';
import { checkHealth } from './health.js';
import type { Maintenance } from '../runtime/maintenance.js';
import type { Metrics } from '../runtime/metrics.js';
import { runPrune } from './retention.js';
import type { StorageGuard } from '../runtime/storage-guard.js';
import { configView, usageReport } from './usage-views.js';
import type { WriteHealth } from '../runtime/write-health.js';
import type { OperationRegistry } from '../../operations/registry.js';
import type { CanaryService } from '../canary/service.js';
import type { ControlPlaneReader } from '../control-plane/reader.js';
import type { PressureMonitor } from '../pressure/monitor.js';
import type { ModelRouter } from '../routing/router.js';

export interface AdminServiceDeps {
  /** Reads outside a write: the last commit (the reader connection). */
  reader: Sql;
  /** Applied and pending migrations (health's `migrations_applied`). */
  migrations: () => Promise<{ applied: number; pending: number }>;
  /** Where the state is: the SQLite file, or the Postgres URL with its password redacted. */
  databaseLocation: string;
  write: Write;
  clock: Clock;
  config: DaemonConfig;
  logger: Logger;
  engine: Pick<Engine, 'inFlightCount' | 'recoveryDone' | 'rateLimitSnapshot'>;
  operations: OperationRegistry;
  /** Each endpoint's breaker (health) and each operation's route (`config show`). */
  router: ModelRouter;
  pressure: Pick<PressureMonitor, 'snapshot'>;
  canary: Pick<CanaryService, 'snapshot'>;
  /** A prune's dry run reads the whole history: in the control plane's worker thread. */
  controlPlane: Pick<ControlPlaneReader, 'run'>;
  storage: Pick<StorageGuard, 'snapshot'>;
  writeHealth: Pick<WriteHealth, 'healthy'>;
  maintenance: Pick<Maintenance, 'run'>;
  metrics: Pick<Metrics, 'text'>;
}

export class AdminService {
  private readonly startedAt: number;

  constructor(private readonly d: AdminServiceDeps) {
    this.startedAt = d.clock.now();
  }

  status() {
    const c = this.d.config;
    return {
      pid: process.pid,
      socket: c.socketPath,
      version: VERSION,
      uptime_s: Math.round((this.d.clock.now() - this.startedAt) / 1000),
      db_path: this.d.databaseLocation,
    };
  }

  health() {
    const { engine } = this.d;
    return checkHealth({
      migrations: this.d.migrations,
      probe: () => this.d.write(() => true),
      infraHealthy: this.d.writeHealth.healthy,
      recoveryDone: engine.recoveryDone,
      breakers: this.d.router.breakerSnapshots(),
      storage: this.d.storage.snapshot(),
      rateLimits: engine.rateLimitSnapshot(),
      pressure: this.d.pressure.snapshot(),
      canary: this.d.canary.snapshot(),
    });
  }

  async stats() {
    const byStatus = (rows: { status: string; n: number }[]) => Object.fromEntries(rows.map((r) => [r.status, r.n]));
    // The same definition of a call as `usage` and `thread`: one that reached the provider and may be billed.
    const usage = await sumAllUsage(this.d.reader);
    return {
      threads: byStatus(await countThreadsByStatus(this.d.reader)),
      work_items: byStatus(await countWorkItemsByStatus(this.d.reader)),
      in_flight: this.d.engine.inFlightCount,
      ledger_entries: await countLedgerEntries(this.d.reader),
      calls: usage.calls,
      tokens: { prompt: usage.prompt_tokens, completion: usage.completion_tokens },
      rate_limits: this.d.engine.rateLimitSnapshot(),
    };
  }

  /** Prometheus text (`combine metrics`, and /metrics when a port is set). */
  metrics(): Promise<string> {
    return this.d.metrics.text();
  }

  async usage(projectId: string | null) {
    return await usageReport(this.d.reader, this.d.config, projectId, this.d.clock.now());
  }

  config() {
    return configView(this.d.config, this.d.operations, this.d.router);
  }

  /** Removes closed threads older than `olderThanMs` (see retention.ts), then returns freed pages. */
  prune(olderThanMs: number, dryRun: boolean) {
    const { write, logger, maintenance, controlPlane } = this.d;
    const preview = (cutoff: number) => controlPlane.run('previewPrune', { cutoff });
    return runPrune({ write, preview, logger, maintenance }, this.d.clock.now() - olderThanMs, dryRun);
  }
}
