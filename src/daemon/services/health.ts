/**
 * `combine health`: liveness (the daemon answers at all) and readiness, from checks that each test the
 * real thing: the database takes a write through the writer, every shipped migration is applied, the
 * start-up recovery scan has run, no provider endpoint's circuit breaker is open, storage has room
 * (claiming is not paused by a full disk), commands are accepted (the WAL is under its limit), and the
 * canary is neither late nor failed. Provider rate-limit holds and CPU, memory and battery pressure are
 * shown, not counted against readiness: the daemon works, only slower.
 */
import type { CanarySnapshot } from '../canary/service.js';
import type { BreakerSnapshot } from '../engine/breaker.js';
import type { PressureSnapshot } from '../pressure/monitor.js';
import type { StorageSnapshot } from '../runtime/storage-guard.js';

/** A write that does not answer within this time counts as a database that is not writable. */
const WRITE_PROBE_TIMEOUT_MS = 2000;

export interface HealthInputs {
  /** Applied and pending migrations, as the backend counts them (SQLite: db/migrate.ts migrationStatus). */
  migrations: () => Promise<{ applied: number; pending: number }>;
  /** Any write: an empty one through the writer proves the queue moves. */
  probe: () => Promise<unknown>;
  infraHealthy: boolean;
  recoveryDone: boolean;
  /** Each provider endpoint's circuit breaker, by endpoint. */
  breakers: Record<string, BreakerSnapshot>;
  storage: StorageSnapshot;
  pressure: PressureSnapshot;
  canary: CanarySnapshot;
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
    migrations = await i.migrations();
  } catch {
    // An unreadable migrations table or folder: not ready.
  }
  const checks = {
    database: writable,
    migrations_applied: migrations.pending === 0,
    recovery_scan_done: i.recoveryDone,
    provider_breakers_closed: Object.values(i.breakers).every((b) => b.state !== 'open'),
    // Claiming is paused: the disk is full or under storage.min_free_bytes.
    storage: i.storage.state === 'ok',
    // Commands are refused while the WAL is over pressure.wal.max_bytes (BACKPRESSURE).
    accepting_commands: i.pressure.accepting_commands,
    // The last canary did not fail, and none is unfinished past canary.timeout.
    canary: i.canary.ok,
  };
  const ready = Object.values(checks).every(Boolean);
  return {
    live: true,
    ready,
    status: ready ? 'ready' : 'unready',
    checks,
    migrations,
    breakers: i.breakers,
    storage: i.storage,
    rate_limits: i.rateLimits,
    pressure: i.pressure,
    canary: i.canary,
  };
}
