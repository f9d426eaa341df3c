/**
 * The owner id a daemon process writes into the leases it takes (`lease_owner`, schedules' `claim_owner`):
 * `<home prefix><random>`. The prefix is the same for every process of one COMBINE_HOME, so a daemon
 * starting on a shared database knows which leases its home's earlier processes left: the home lock
 * (runtime/home-lock.ts) proves that process dead, and its items need not wait for their leases to
 * expire. The random part tells this process from them.
 *
 * The prefix is a random id kept in the home (`daemon-id`), made by its first daemon: not derived from
 * the host name and the home's path, which two containers can share (host networking or a fixed
 * hostname, the same COMBINE_HOME path on different volumes) — each would take the other's live leases
 * at every start and pay for those calls twice. A home copied elsewhere must not keep this file.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface DaemonOwner {
  /** This process's owner id. */
  owner: string;
  /** What every owner id of this home starts with. */
  homePrefix: string;
}

const ID_FILE = 'daemon-id';
const ID = /^[0-9a-f]{16}$/;

export function daemonOwner(home: string): DaemonOwner {
  const homePrefix = `${homeId(home)}:`;
  return { owner: `${homePrefix}${randomUUID()}`, homePrefix };
}

/** The home's id: read, or made once (`wx`: of two first starts racing, one writes and both read it). */
function homeId(home: string): string {
  const path = join(home, ID_FILE);
  try {
    writeFileSync(path, `${randomBytes(8).toString('hex')}\n`, { flag: 'wx', mode: 0o600 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
  const id = readFileSync(path, 'utf8').trim();
  if (!ID.test(id)) throw new Error(`${path} does not hold a daemon id (16 hex digits); remove it and start again`);
  return id;
}
