/**
 * `refusedValueOf` (db/errors.ts), the one place a failed write is named a refused value (the item then ends
 * VALUE_REFUSED, never retried) or not (retried as storage trouble, or thrown as a bug of our own SQL): every
 * SQLSTATE its list keeps maps to a RefusedValueError; the other codes of classes 22 and 54 (a bug in a
 * statement, not a stored value), storage trouble, conflicts and stale guards do not; SQLite's SQLITE_TOOBIG does.
 * The errors are the drivers' own classes (node-postgres's DatabaseError, better-sqlite3's SqliteError), as
 * the writers see them.
 */
import Database from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { RefusedValueError } from '../../src/core/errors.js';
import { asClientError, isInfraPgError, isInfraSqliteError, isTransactionConflict, refusedValueOf } from '../../src/db/errors.js';

/** A server error as node-postgres raises it: the SQLSTATE in `code`, the server's message. */
function serverError(code: string, message = `the server says ${code}`): Error {
  return Object.assign(new pg.DatabaseError(message, message.length, 'error'), { code });
}

const sqliteError = (code: string, message = `sqlite says ${code}`): Error => new Database.SqliteError(message, code);

/** Each SQLSTATE of a value the server refuses, with what it means. */
const REFUSED = [
  ['22021', 'a NUL or invalid byte in text'],
  ['22P05', 'an untranslatable Unicode escape'],
  ['22001', 'too long for its column'],
  ['22003', 'a number out of its column range'],
  ['22P02', 'text not of the column type'],
  ['22007', 'a date or time out of format'],
  ['22008', 'a date or time out of range'],
  ['54000', 'an index row too large'],
] as const;

/** Codes of classes 22 and 54 that mean a bug in our own SQL, not a value an item brought. */
const OUR_SQL = [
  ['22004', 'null not allowed'],
  ['22012', 'division by zero'],
  ['2201W', 'a bad LIMIT'],
  ['2201X', 'a bad OFFSET'],
  ['22023', 'an invalid parameter'],
  ['2202E', 'an array subscript'],
  ['22000', 'the class itself'],
  ['54001', 'stack depth'],
  ['54011', 'too many columns'],
  ['54023', 'too many arguments'],
] as const;

/** Storage in trouble, seen by the server or the client: retried until storage takes the write, never an item's end. */
const INFRA_PG = [
  ['08006', 'connection failure'],
  ['53100', 'disk full'],
  ['53300', 'too many connections'],
  ['57P01', 'admin shutdown'],
  ['57014', 'query canceled'],
  ['58030', 'I/O error'],
  ['XX001', 'data corrupted'],
  ['ECONNRESET', 'the socket reset'],
  ['ECONNREFUSED', 'no server'],
] as const;

describe('refusedValueOf', () => {
  it.each(REFUSED)('%s (%s) is a refused value, with its SQLSTATE, the server message and the error as its cause', (code) => {
    const err = serverError(code);
    const refused = refusedValueOf(err);
    expect(refused).toBeInstanceOf(RefusedValueError);
    expect(refused).toMatchObject({ sqlstate: code, message: `storage refused a value: the server says ${code} (${code})`, cause: err });
    expect(asClientError(err)).toBeInstanceOf(RefusedValueError);
  });

  it.each(OUR_SQL)('%s (%s) is not: thrown as it is, the step failed', (code) => {
    const err = serverError(code);
    expect(refusedValueOf(err)).toBeNull();
    expect(asClientError(err)).toBe(err);
  });

  it.each(INFRA_PG)('%s (%s) is storage trouble, not a refused value', (code) => {
    const err = serverError(code);
    expect(refusedValueOf(err)).toBeNull();
    expect(isInfraPgError(err)).toBe(true);
  });

  it("node-postgres's own error for a connection that ended (no code) is storage trouble, not a refused value", () => {
    const err = new Error('Connection terminated unexpectedly');
    expect(refusedValueOf(err)).toBeNull();
    expect(isInfraPgError(err)).toBe(true);
  });

  it.each([
    ['40001', 'a serialization failure'],
    ['40P01', 'a deadlock'],
  ])('%s (%s) is a conflict run again, not a refused value', (code) => {
    expect(refusedValueOf(serverError(code))).toBeNull();
    expect(isTransactionConflict(serverError(code))).toBe(true);
  });

  it.each([
    ['23505', 'a unique key another transaction took'],
    ['23503', 'a foreign key'],
    ['CB001', 'a stale guard the database checked at COMMIT'],
    ['42P01', 'an unknown table'],
  ])('%s (%s) is not a refused value', (code) => {
    expect(refusedValueOf(serverError(code))).toBeNull();
  });

  it('SQLITE_TOOBIG (a string or blob over the length limit) is a refused value; storage trouble and constraints of SQLite are not', () => {
    const toobig = sqliteError('SQLITE_TOOBIG', 'string or blob too big');
    expect(refusedValueOf(toobig)).toMatchObject({ sqlstate: 'SQLITE_TOOBIG', message: 'storage refused a value: string or blob too big (SQLITE_TOOBIG)' });
    for (const code of ['SQLITE_FULL', 'SQLITE_BUSY', 'SQLITE_IOERR_WRITE', 'SQLITE_CORRUPT']) {
      expect(refusedValueOf(sqliteError(code))).toBeNull();
      expect(isInfraSqliteError(sqliteError(code))).toBe(true);
    }
    expect(refusedValueOf(sqliteError('SQLITE_CONSTRAINT_UNIQUE'))).toBeNull();
    expect(refusedValueOf(sqliteError('SQLITE_ERROR'))).toBeNull();
  });

  it('no code, a code not a string, or nothing thrown at all: not a refused value', () => {
    expect(refusedValueOf(new Error('value too long'))).toBeNull();
    expect(refusedValueOf({ code: 22001, message: 'a number, not a SQLSTATE' })).toBeNull();
    expect(refusedValueOf(null)).toBeNull();
    expect(refusedValueOf(undefined)).toBeNull();
  });

  it('a RefusedValueError already named is returned as it is', () => {
    const refused = new RefusedValueError('22001', 'too long');
    expect(refusedValueOf(refused)).toBe(refused);
  });

  it("keeps the server's message storable: a NUL written out, at most 500 characters", () => {
    const withNul = refusedValueOf(serverError('22021', 'invalid byte sequence: 0x00 in "a\u0000b"'))!;
    expect(withNul.message).not.toContain('\u0000');
    expect(withNul.message).toContain('invalid byte sequence');
    const long = refusedValueOf(serverError('22001', 'x'.repeat(2_000)))!;
    expect(long.message).toBe(`storage refused a value: ${'x'.repeat(500)}… (22001)`);
  });
});
