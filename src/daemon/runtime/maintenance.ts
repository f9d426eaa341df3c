/**
 * Idle maintenance: once the daemon has been quiet for `idleMs` (no commit, no call in flight, no write
 * queued), it truncates the WAL and returns free pages to the file system (incremental vacuum). Both
 * run through the writer, outside a transaction, so they never interleave with engine writes.
 *
 * Databases created before auto_vacuum=INCREMENTAL was set at creation are converted once, by a VACUUM
 * in the first idle window (it rewrites the file; it is logged with its duration).
 */
import { statSync } from 'node:fs';
import type { Db } from '../../db/connection.js';
import type { Writer } from '../../db/writer.js';
import type { Clock } from '../../core/clock.js';
import type { Logger } from '../../core/logger.js';

export interface MaintenanceResult {
  converted_to_incremental: boolean;
  freed_pages: number;
  wal_bytes_before: number;
  wal_bytes_after: number;
  /** The checkpoint could not finish (a reader held an old snapshot); the next idle window retries. */
  checkpoint_busy: boolean;
}

export interface MaintenanceOptions {
  db: Db;
  writer: Pick<Writer<never>, 'pending' | 'outsideTransaction'>;
  walPath: string;
  logger: Logger;
  clock: Clock;
  idleMs: number;
  /** The engine: maintenance waits while calls are in flight. */
  calls: { readonly inFlightCount: number };
  observer?: { onMaintenance(r: MaintenanceResult): void };
}

const AUTO_VACUUM_INCREMENTAL = 2;

export function walBytes(walPath: string): number {
  try {
    return statSync(walPath).size;
  } catch {
    return 0;
  }
}

export class Maintenance {
  private timer: NodeJS.Timeout | null = null;
  private lastActivity: number;
  private lastRunAt = 0;
  private running = false;

  constructor(private readonly o: MaintenanceOptions) {
    this.lastActivity = o.clock.now();
  }

  /** Anything that wrote: the idle window starts again. */
  noteActivity(): void {
    this.lastActivity = this.o.clock.now();
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.min(this.o.idleMs, 60_000)));
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }

  private async tick(): Promise<void> {
    const now = this.o.clock.now();
    if (this.running || this.o.calls.inFlightCount > 0 || this.o.writer.pending > 0) return;
    // Quiet since the last commit, and something happened since the last run.
    if (now - this.lastActivity < this.o.idleMs || this.lastRunAt > this.lastActivity) return;
    await this.run();
  }

  /** Checkpoints the WAL and vacuums free pages now (after writes already queued). */
  async run(): Promise<MaintenanceResult> {
    this.running = true;
    try {
      const result = await this.o.writer.outsideTransaction((db) => this.maintain(db));
      this.lastRunAt = this.o.clock.now();
      this.o.observer?.onMaintenance(result);
      if (result.freed_pages > 0 || result.converted_to_incremental) this.o.logger.info({ component: 'maintenance', ...result }, 'idle maintenance');
      return result;
    } finally {
      this.running = false;
    }
  }

  private maintain(db: Db): MaintenanceResult {
    const walBefore = walBytes(this.o.walPath);
    let converted = false;
    if (Number(db.pragma('auto_vacuum', { simple: true })) !== AUTO_VACUUM_INCREMENTAL) {
      const started = performance.now();
      db.pragma('auto_vacuum = INCREMENTAL');
      db.exec('VACUUM');
      converted = true;
      this.o.logger.info(
        { component: 'maintenance', ms: Math.round(performance.now() - started) },
        'converted the database to auto_vacuum=INCREMENTAL (one-time VACUUM)',
      );
    }
    const free = Number(db.pragma('freelist_count', { simple: true }));
    if (free > 0) db.pragma('incremental_vacuum');
    const freed = free - Number(db.pragma('freelist_count', { simple: true }));
    // Never wait for readers here: a busy checkpoint is simply retried in the next idle window.
    const busyTimeout = Number(db.pragma('busy_timeout', { simple: true }));
    db.pragma('busy_timeout = 0');
    let busy = false;
    try {
      const [r] = db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number }[];
      busy = (r?.busy ?? 0) !== 0;
    } finally {
      db.pragma(`busy_timeout = ${busyTimeout}`);
    }
    return {
      converted_to_incremental: converted,
      freed_pages: freed,
      wal_bytes_before: walBefore,
      wal_bytes_after: walBytes(this.o.walPath),
      checkpoint_busy: busy,
    };
  }
}
