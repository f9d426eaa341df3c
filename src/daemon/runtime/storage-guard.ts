/**
 * Storage pressure (seed 003): the daemon keeps running on a full disk, but starts no paid call whose
 * answer it might not be able to record. The guard measures the free space of COMBINE_HOME's file
 * system every `storage.probe_interval` and hears of every write that failed for lack of space:
 *
 *   ok         free space at or above `storage.min_free_bytes`: claiming runs
 *   low_space  under the threshold: claiming pauses (commands are still accepted and queued)
 *   disk_full  no space at all, or a write failed with "disk full" and space has not come back above
 *              the threshold: claiming pauses
 *
 * It turns `ok` again by itself once a probe finds enough space, and says so (`onChange`).
 */
import { statfsSync } from 'node:fs';
import type { StorageConfig } from '../config/limits.js';
import { formatBytes } from './server-limits.js';
import type { Logger } from '../../core/logger.js';

export type StorageState = 'ok' | 'low_space' | 'disk_full';

export interface StorageSnapshot {
  state: StorageState;
  /** What health shows: "ok", "disk full", or "low on space: … free, under …". */
  status: string;
  free_bytes: number | null;
  min_free_bytes: number;
  /** Log lines dropped because the log file could not be written. */
  log_lines_dropped: number;
}

/** SQLite's and the file system's ways of saying "no space left". */
export function isDiskFull(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | null, depth = 0; e && depth < 4; e = e.cause as typeof e, depth++) {
    if (e.code === 'SQLITE_FULL' || e.code === 'ENOSPC' || e.code === 'EDQUOT') return true;
  }
  return false;
}

export class StorageGuard {
  private state: StorageState = 'ok';
  private freeBytes: number | null = null;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly o: StorageConfig & {
      dir: string;
      /** The log file: its dropped-line count shows in health. */
      logFile?: { readonly dropped: number } | undefined;
      onChange: (state: StorageState, snapshot: StorageSnapshot) => void;
      statfs?: (dir: string) => { bavail: number; bsize: number };
    },
  ) {}

  start(): void {
    this.probe();
    this.timer = setInterval(() => this.probe(), this.o.probeIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Claims may start: a call's answer can be recorded. */
  get allowsClaims(): boolean {
    return this.state === 'ok';
  }

  /** A write failed for lack of space (SQLITE_FULL, ENOSPC). Non-space failures are ignored here. */
  noteWriteFailure(err: unknown): void {
    if (isDiskFull(err)) this.set('disk_full');
  }

  probe(): void {
    try {
      const s = (this.o.statfs ?? statfsSync)(this.o.dir);
      this.freeBytes = s.bavail * s.bsize;
    } catch {
      return; // cannot measure: keep the last verdict
    }
    if (this.freeBytes >= this.o.minFreeBytes && this.freeBytes > 0) this.set('ok');
    else if (this.freeBytes === 0) this.set('disk_full');
    else if (this.state !== 'disk_full') this.set('low_space');
  }

  snapshot(): StorageSnapshot {
    const status =
      this.state === 'ok'
        ? 'ok'
        : this.state === 'disk_full'
          ? 'disk full'
          : `low on space: ${formatBytes(this.freeBytes ?? 0)} free, under storage.min_free_bytes (${formatBytes(this.o.minFreeBytes)}); claiming is paused`;
    return { state: this.state, status, free_bytes: this.freeBytes, min_free_bytes: this.o.minFreeBytes, log_lines_dropped: this.o.logFile?.dropped ?? 0 };
  }

  private set(state: StorageState): void {
    if (state === this.state) return;
    this.state = state;
    this.o.onChange(state, this.snapshot());
  }
}

/** Says in the log when claiming pauses for lack of space and when it resumes; `onRoom` runs then. */
export function reportStorageChanges(logger: Logger, onRoom: () => void): (state: StorageState, snapshot: StorageSnapshot) => void {
  return (state, snapshot) => {
    if (state === 'ok') {
      logger.warn({ storage: snapshot }, 'storage has room again: claiming resumes');
      onRoom();
    } else logger.error({ storage: snapshot }, `storage: ${snapshot.status}; no new provider calls start until there is room`);
  };
}
