/**
 * The owner id a daemon process writes into the leases it takes (`lease_owner`, schedules' `claim_owner`):
 * `<home prefix><random>`. The prefix is the same for every process of one COMBINE_HOME on one machine,
 * so a daemon starting on a shared database knows which leases its home's earlier processes left: the
 * home lock (runtime/home-lock.ts) proves that process dead, and its items need not wait for their
 * leases to expire. The random part tells this process from them.
 */
import { createHash, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';

export interface DaemonOwner {
  /** This process's owner id. */
  owner: string;
  /** What every owner id of this home on this machine starts with. */
  homePrefix: string;
}

export function daemonOwner(home: string): DaemonOwner {
  const homePrefix = `${createHash('sha256')
    .update(`${hostname()}\0${resolve(home)}`)
    .digest('hex')
    .slice(0, 16)}:`;
  return { owner: `${homePrefix}${randomUUID()}`, homePrefix };
}
