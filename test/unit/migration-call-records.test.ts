/**
 * Migration 0017 on a home written before the call records were merged into the charges: each charge
 * takes the telemetry of the call record its settle or close wrote, and each mutation names the answer
 * whose charge was marked applied, so usage counts the same calls as wasted before and after.
 * (Postgres's migration 0011: postgres-schema.test.ts, with the same home.)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { sumThreadUsage } from '../../src/db/charges.js';
import { openDatabase } from '../../src/db/connection.js';
import { applyMigrations } from '../../src/db/migrate.js';
import { SqliteSql } from '../../src/db/sql.js';
import { EXPECTED_CHARGES, EXPECTED_CHARGES_SQL, EXPECTED_USAGE, OLD_HOME } from '../helpers/call-records-migration.js';
import { migrationsBefore } from '../helpers/migrations.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('migration 0017 (call records in the charges)', () => {
  it('moves each call record onto its charge and names the applied answer on its mutation', async () => {
    const home = mkdtempSync(join(tmpdir(), 'cmb-home-'));
    dirs.push(home);
    const db = openDatabase(join(home, 'combine.db'));
    applyMigrations(db, migrationsBefore('0017_merge_call_records', dirs));
    for (const statement of OLD_HOME) db.prepare(statement).run();
    applyMigrations(db);
    expect(db.prepare(EXPECTED_CHARGES_SQL).all()).toEqual(EXPECTED_CHARGES);
    expect(db.prepare('SELECT id, response_seq FROM mutations').all()).toEqual([{ id: 'm1', response_seq: 10 }]);
    expect(await sumThreadUsage(new SqliteSql(db), 't1')).toMatchObject(EXPECTED_USAGE);
    expect(db.prepare("SELECT 1 FROM sqlite_master WHERE name = 'llm_call_records'").get()).toBeUndefined();
    db.close();
  });
});
