/**
 * What the Postgres round-trip tests of a submit and of a claim round share (pg-round-trips,
 * pg-claim-round): per test, a fresh migrated database, a home and the operations loaded from it
 * (`useSubmitDatabase`); and a transaction's handle that counts the statements sent through it
 * (`CountingSql`), each still run on the real connection.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach } from 'vitest';
import type { RunResult, Sql, SqlParams } from '../../src/core/sql.js';
import { loadConfig, operationSettingsOf } from '../../src/daemon/config/config.js';
import { loadOperations } from '../../src/operations/loader.js';
import type { OperationRegistry } from '../../src/operations/registry.js';
import { openRaceDatabase, type RaceDatabase } from './pg-race.js';

/**
 * The transaction's own handle, each statement's text recorded before it runs on it; `afterAll`, when
 * given, is awaited after each `all` statement returned (a test holds the transaction there).
 */
export class CountingSql implements Sql {
  readonly dialect;
  readonly texts: string[] = [];
  /** Statements sent on their own (not queued for the COMMIT's query): one round trip each. */
  roundTrips = 0;
  readonly atCommit?: Sql['atCommit'];
  constructor(
    private readonly inner: Sql,
    private readonly afterAll?: (text: string) => Promise<void>,
  ) {
    this.dialect = inner.dialect;
    const atCommit = inner.atCommit;
    if (atCommit) {
      this.atCommit = (text, params, committed) => {
        this.texts.push(text);
        atCommit(text, params, committed);
      };
    }
  }
  get connection(): object {
    return this.inner.connection;
  }
  get<T>(text: string, params?: SqlParams): Promise<T | undefined> {
    this.texts.push(text);
    this.roundTrips++;
    return this.inner.get<T>(text, params);
  }
  async all<T>(text: string, params?: SqlParams): Promise<T[]> {
    this.texts.push(text);
    this.roundTrips++;
    const rows = await this.inner.all<T>(text, params);
    await this.afterAll?.(text);
    return rows;
  }
  run(text: string, params?: SqlParams): Promise<RunResult> {
    this.texts.push(text);
    this.roundTrips++;
    return this.inner.run(text, params);
  }
}

/** A test's database, home and operations: set before each test, the database dropped after it. */
export type SubmitDatabase = { db: RaceDatabase; home: string; operations: OperationRegistry };

/** Registers the hooks that give each test of the file a fresh `SubmitDatabase` (read its fields inside a test). */
export function useSubmitDatabase(): SubmitDatabase {
  const t = {} as SubmitDatabase;
  beforeEach(async () => {
    t.db = await openRaceDatabase();
    t.home = mkdtempSync(join(tmpdir(), 'cmb-pg-round-trips-'));
    t.operations = await loadOperations(t.home, [], operationSettingsOf(loadConfig(t.home, {})));
  });
  afterEach(async () => {
    rmSync(t.home, { recursive: true, force: true });
    await t.db?.drop();
  });
  return t;
}
