/**
 * Storage failures that mean our storage itself is in trouble, as opposed to a logic error (a refused
 * constraint, a stale guard): the design's "infra" class, for both backends, classified here only.
 */
import { RefusedValueError, StaleStateError } from '../core/errors.js';
import { escapeNul } from '../domain/nul.js';

const INFRA_CODE_PREFIXES = [
  'SQLITE_BUSY',
  'SQLITE_LOCKED',
  'SQLITE_FULL',
  'SQLITE_IOERR',
  'SQLITE_CORRUPT',
  'SQLITE_CANTOPEN',
  'SQLITE_READONLY',
  'SQLITE_NOMEM',
  'SQLITE_PROTOCOL',
  'SQLITE_NOTADB',
];

/** True for busy-beyond-timeout, disk full, I/O and corruption errors (the design's "infra" class). */
export function isInfraSqliteError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && INFRA_CODE_PREFIXES.some((p) => code.startsWith(p));
}

/**
 * Postgres SQLSTATE classes of a server in trouble: 08 connection exception, 53 insufficient resources
 * (disk full, out of memory, too many connections), 57 operator intervention (shutdown, cancel), 58
 * system error (I/O), XX internal error (corruption).
 */
const PG_INFRA_CLASSES = ['08', '53', '57', '58', 'XX'];
/** The socket to the server failed or never opened: the same trouble, seen from the client. */
const SOCKET_CODES = ['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH'];

/** True when a Postgres statement failed because the server or the connection to it did. */
export function isInfraPgError(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (typeof e?.code === 'string') {
    if (e.code.length === 5 && PG_INFRA_CLASSES.includes(e.code.slice(0, 2))) return true;
    if (SOCKET_CODES.includes(e.code)) return true;
  }
  // node-postgres's own errors for a connection that ended carry no code.
  return typeof e?.message === 'string' && /Connection terminated|connection error and is not queryable|Client was closed/.test(e.message);
}

/**
 * A transaction Postgres aborted to resolve a conflict with another (40001 serialization failure,
 * 40P01 deadlock): nothing of it was applied, and running it again normally succeeds.
 */
export function isTransactionConflict(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === '40001' || code === '40P01';
}

/**
 * What a write that raced another transaction sees under READ COMMITTED: a guarded statement that
 * matched no row (the other one changed it first: StaleStateError), or a unique key the other one took
 * first (23505). Run again, the write reads what the other committed and decides on it (deduplicates,
 * finds the new version). With one writer (SQLite) neither comes from a race.
 */
export function isConcurrentChange(err: unknown): boolean {
  return err instanceof StaleStateError || (err as { code?: unknown } | null)?.code === '23505';
}

/**
 * The SQLSTATE a guarded statement raises when it ran in a COMMIT's query and changed no row (or more
 * than one): there the database checks the count (migrations/pg/0012, statements.ts `runGuardedAtCommit`).
 */
const STALE_GUARD_SQLSTATE = 'CB001';

/**
 * SQLSTATE classes of a value the server refuses, whichever statement holds it: 22 data exception
 * (22021 a NUL or invalid byte in text, 22P05 an unsupported Unicode escape, 22001 too long for its
 * column, 22003 and 22P02 a number out of range or not of its column's type) and 54 program limit
 * exceeded (54000: an index row too large). The same write holding the same value fails the same way each
 * time it runs: not storage trouble (which `isInfraPgError` names), a permanent failure of that write.
 */
const PG_REFUSED_VALUE_CLASSES = ['22', '54'];

/**
 * The error as the client names it: a stale guard the database raised is a StaleStateError (its message
 * names the row); a value the server refused is a RefusedValueError.
 */
export function asClientError(err: unknown): unknown {
  const e = err as { code?: unknown; message?: unknown } | null;
  if (e?.code === STALE_GUARD_SQLSTATE) return new StaleStateError(String(e.message));
  return refusedValueOf(err) ?? err;
}

/**
 * `err` as the refusal of a value one write holds (RefusedValueError), or null when it is not one:
 * a Postgres data exception or program limit (`PG_REFUSED_VALUE_CLASSES`), or SQLite's SQLITE_TOOBIG (a
 * string or blob over its length limit). Storage trouble, conflicts and logic errors are not.
 */
export function refusedValueOf(err: unknown): RefusedValueError | null {
  if (err instanceof RefusedValueError) return err;
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = e?.code;
  if (typeof code !== 'string') return null;
  const refused = code === 'SQLITE_TOOBIG' || (code.length === 5 && PG_REFUSED_VALUE_CLASSES.includes(code.slice(0, 2)));
  // The server's message may quote the value: a NUL in it is written out, so the message can be stored.
  return refused ? new RefusedValueError(code, escapeNul(String(e?.message))) : null;
}
