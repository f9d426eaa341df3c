/**
 * `combine health`: liveness (the daemon answers at all) and readiness, from checks that each test the
 * real thing: the database takes a write through the writer, every shipped migration is applied, the
 * start-up recovery scan has run, the provider's circuit breaker is not open, and storage has room
 * (claiming is not paused by a full disk). Provider rate-limit holds are shown, not counted against readiness.
 */
import type { BreakerSnapshot } from '../engine/breaker.js';
import type { StorageSnapshot } from '../runtime/storage-guard.js';

/** A write that does not answer within this time counts as a database that is not writable. */
const WRITE_PROBE_TIMEOUT_MS = 2000;

export interface HealthInputs {
  /** Applied and pending migrations, as the backend counts them (SQLite: db/migrate.ts migrationStatus). */
  migrations: () => { applied: number; pending: number };
  /** Any write: an empty one through the writer proves the queue moves. */
  probe: () => Promise<unknown>;
  infraHealthy: boolean;
  recoveryDone: boolean;
  endpoint: string;
  breaker: BreakerSnapshot;
  storage: StorageSnapshot;
  /** Per model: held back by a provider's 429 until `parked_until` (null: not held). */
  rateLimits: Record<string, { parked_until: string | null }>;
}

/** Commits an empty write through the writer: proves the write lock can be taken and the queue moves. */
async function probeWrite(probe: () => Promise<unknown>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), WRITE_PROBE_TIMEOUT_MS)));
  try {
    return await Promise.race([
      probe().then(
        () => true,
        () => false,
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export async function checkHealth(i: HealthInputs) {
  const writable = (await probeWrite(i.probe)) && i.infraHealthy;
  let migrations = { applied: 0, pending: -1 };
  try {
    migrations = i.migrations();
  } catch {
    // An unreadable migrations table or folder: not ready.
  }
  const checks = {
    database: writable,
    migrations_applied: migrations.pending === 0,
    recovery_scan_done: i.recoveryDone,
    provider_breakers_closed: i.breaker.state !== 'open',
    // Claiming is paused: the disk is full or under storage.min_free_bytes.
    storage: i.storage.state === 'ok',
  };
  const ready = Object.values(checks).every(Boolean);
  return {
    live: true,
    ready,
    status: ready ? 'ready' : 'unready',
    checks,
    migrations,
    breakers: { [i.endpoint]: i.breaker },
    storage: i.storage,
    rate_limits: i.rateLimits,
  };
}
