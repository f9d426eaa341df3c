/**
 * Whether writes are committing: the writer reports a batch that failed after its retries (storage
 * trouble: disk full, I/O error, a lock held too long) and the first one that commits again. Health is
 * unready in between; the log says so once per outage, not once per failed batch.
 */
import type { Logger } from '../../core/logger.js';
import type { StorageGuard } from './storage-guard.js';

export class WriteHealth {
  healthy = true;

  constructor(
    private readonly logger: Logger,
    /** Told of every failed write: a full disk pauses claiming. */
    private readonly storage: Pick<StorageGuard, 'noteWriteFailure'>,
  ) {}

  failed(err: unknown): void {
    this.storage.noteWriteFailure(err);
    if (this.healthy) this.logger.error({ err }, 'storage failure: writes are failing after retries; health is unready');
    this.healthy = false;
  }

  recovered(): void {
    this.healthy = true;
    this.logger.warn('storage recovered; health is ready again');
  }
}
