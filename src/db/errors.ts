/**
 * Storage failures that mean our storage itself is in trouble, as opposed to a logic error (a refused
 * constraint, a stale guard): the design's "infra" class, for both backends, classified here only.
 */
import { RefusedValueError, StaleStateError } from '../core/errors.js';
import { storableMessage } from '../domain/storable-text.js';

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
 * A prepared statement whose result columns changed since this connection prepared it (0A000 "cached plan
 * must not change result type"): another process changed the schema under it (a newer daemon's migration
 * during a rolling upgrade adds a column a `SELECT *` or `RETURNING *` returns). It ran nothing, and fails the
 * same way on that connection until the connection is closed; on a new connection the statement is prepared
 * again, with the new columns. 0A000 alone is any unsupported feature, so where it was raised is checked too:
 * the server's function (`routine`, never translated), or its English message for a server that sends none.
 */
export function isStalePreparedStatement(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown; routine?: unknown } | null;
  if (e?.code !== '0A000') return false;
  return e.routine === 'RevalidateCachedQuery' || (typeof e.message === 'string' && e.message.includes('cached plan must not change result type'));
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
 * SQLSTATEs of a value the server refuses, whichever statement holds it. Kept: 22021 (a NUL or invalid
 * byte in text), 22P05 (an untranslatable Unicode escape), 22001 (too long for its column), 22003 (a
 * number out of its column's range), 22P02 (a value's text not of its column's type: every cast our
 * statements make is of a value an item brought, e.g. a provider's usage 1.5 into an integer), 22007 and
 * 22008 (a date or time out of format or range) and 54000 (an index row too large). The same write holding
 * the same value fails the same way each time it runs: not storage trouble (which `isInfraPgError`
 * names), a permanent failure of that write.
 * Left out, though in classes 22 and 54, as they mean a bug in our own SQL rather than a stored value:
 * 22004 (null not allowed), 22012 (division by zero), 2201W/2201X (a bad LIMIT/OFFSET), 22023 (an invalid
 * parameter), 2202E (an array subscript), 54001 (stack depth), 54011 (too many columns), 54023 (too many
 * arguments). They keep the old path: thrown, logged as the step's failure, the item resumed.
 */
const PG_REFUSED_VALUE_CODES = ['22021', '22P05', '22001', '22003', '22P02', '22007', '22008', '54000'];

/** The most of the server's message kept in the error (it may quote the whole refused value, which is then stored with the item's error). */
const REFUSED_MESSAGE_CHARS = 500;

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
 * a Postgres data exception or program limit that means a value (`PG_REFUSED_VALUE_CODES`), or SQLite's SQLITE_TOOBIG (a
 * string or blob over its length limit). Storage trouble, conflicts and logic errors are not.
 */
export function refusedValueOf(err: unknown): RefusedValueError | null {
  if (err instanceof RefusedValueError) return err;
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = e?.code;
  if (typeof code !== 'string') return null;
  if (code !== 'SQLITE_TOOBIG' && !PG_REFUSED_VALUE_CODES.includes(code)) return null;
  // The server's message may quote the value: a NUL in it is written out, half a surrogate pair made U+FFFD, and its
  // length bounded, so the message can be stored.
  const message = storableMessage(String(e?.message));
  const bounded = message.length > REFUSED_MESSAGE_CHARS ? `${message.slice(0, REFUSED_MESSAGE_CHARS)}…` : message;
  return new RefusedValueError(code, bounded, err);
}
