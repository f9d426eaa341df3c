/** SQLite failure codes that mean our storage itself is in trouble, as opposed to a logic error. */

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
