/**
 * One daemon per COMBINE_HOME. The lock is an exclusive SQLite lock (a POSIX record lock taken by the
 * kernel) on `COMBINE_HOME/daemon.lock`:
 *
 * - only the home's owner can reach it: the file is 0600 inside the 0700 home, so another local user can
 *   neither take it nor learn anything from it (the old lock, an abstract socket named after the home,
 *   could be computed and bound by anyone, which kept the owner's daemon from ever starting);
 * - taking it is atomic: of two daemons starting together exactly one gets it;
 * - the kernel drops it when the process dies, SIGKILL included: there is never a stale lock to clean up.
 */
import { chmodSync, closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';

export const LOCK_FILE = 'daemon.lock';

export interface HomeLock {
  release(): void;
}

/** Takes the home's lock, or returns null when another live process holds it. */
export function acquireHomeLock(home: string): HomeLock | null {
  const path = join(home, LOCK_FILE);
  closeSync(openSync(path, 'a', 0o600));
  chmodSync(path, 0o600);
  const db = new Database(path);
  try {
    // EXCLUSIVE locking mode keeps the lock after the transaction that takes it; no wait for a holder.
    // The journal stays in memory: taking the lock writes no file, so it works on a full disk too.
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = MEMORY');
    db.exec('BEGIN EXCLUSIVE; COMMIT');
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return null;
    throw err;
  }
  return { release: () => db.close() };
}
