/**
 * SQLite behind the `Sql` handle (core/sql.ts). better-sqlite3 answers synchronously: each method is an
 * `async` function returning the value it already has, so a statement costs one settled promise and no
 * I/O wait; the prepared-statement cache (statements.ts) is the connection's, shared by all handles.
 */
import type Database from 'better-sqlite3';
import type { RunResult, Sql, SqlParams } from '../core/sql.js';
import type { Db } from './connection.js';
import { prepared } from './statements.js';

function call(stmt: Database.Statement, op: 'get' | 'all' | 'run', params: SqlParams | undefined): unknown {
  if (params === undefined) return stmt[op]();
  return Array.isArray(params) ? stmt[op](...params) : stmt[op](params);
}

/** A better-sqlite3 connection as an `Sql` handle. */
export class SqliteSql implements Sql {
  readonly dialect = 'sqlite' as const;
  constructor(readonly db: Db) {}

  get connection(): object {
    return this.db;
  }

  async get<T>(text: string, params?: SqlParams): Promise<T | undefined> {
    return call(prepared(this.db, text), 'get', params) as T | undefined;
  }

  async all<T>(text: string, params?: SqlParams): Promise<T[]> {
    return call(prepared(this.db, text), 'all', params) as T[];
  }

  async run(text: string, params?: SqlParams): Promise<RunResult> {
    return { changes: (call(prepared(this.db, text), 'run', params) as Database.RunResult).changes };
  }
}

/**
 * The writer's handle as one write closure sees it: usable until the closure has settled, refused after.
 * A statement a closure forgot to await would otherwise run later, inside another closure's savepoint
 * or outside any transaction; refused, it fails loudly instead.
 */
export class ClosureSql implements Sql {
  readonly dialect = 'sqlite' as const;
  private open = true;
  constructor(private readonly inner: SqliteSql) {}

  get connection(): object {
    return this.inner.db;
  }

  revoke(): void {
    this.open = false;
  }

  get<T>(text: string, params?: SqlParams): Promise<T | undefined> {
    return this.open ? this.inner.get<T>(text, params) : this.refused();
  }

  all<T>(text: string, params?: SqlParams): Promise<T[]> {
    return this.open ? this.inner.all<T>(text, params) : this.refused();
  }

  run(text: string, params?: SqlParams): Promise<RunResult> {
    return this.open ? this.inner.run(text, params) : this.refused();
  }

  private refused(): Promise<never> {
    return Promise.reject(new Error('a statement ran after its write closure ended (a missing await?)'));
  }
}
