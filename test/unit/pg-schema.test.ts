/**
 * The Postgres schema mirrors the SQLite one: same tables, columns, keys, indexes (with their partial
 * conditions) and row types, so storage code reads the same rows from either backend. A change to
 * src/db/schema.ts that is not made to src/db/pg/schema.ts fails here.
 */
import { getTableConfig as pgTableConfig, PgDialect, PgTable } from 'drizzle-orm/pg-core';
import { getTableConfig as sqliteTableConfig, SQLiteSyncDialect, SQLiteTable } from 'drizzle-orm/sqlite-core';
import type { SQL } from 'drizzle-orm';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as pgSchema from '../../src/db/pg/schema.js';
import * as sqliteSchema from '../../src/db/schema.js';

/** Tables only Postgres has: the chain head that serializes appends across daemons. */
const PG_ONLY = ['llm_ledger_head'];

type Config = ReturnType<typeof pgTableConfig> | ReturnType<typeof sqliteTableConfig>;

function describeTable(config: Config, render: (sql: SQL) => string) {
  const primary = config.primaryKeys.flatMap((pk) => pk.columns.map((c) => c.name));
  return {
    columns: config.columns.map((c) => ({
      name: c.name,
      notNull: c.notNull,
      primary: c.primary || primary.includes(c.name),
      unique: c.isUnique,
      default: c.default === undefined ? null : String(c.default),
    })),
    indexes: config.indexes
      .map((i) => ({
        name: i.config.name,
        unique: i.config.unique,
        columns: i.config.columns.map((c) => (c as { name: string }).name),
        where: i.config.where ? render(i.config.where) : null,
      }))
      .sort((a, b) => String(a.name).localeCompare(String(b.name))),
    foreignKeys: config.foreignKeys
      .map((fk) => {
        const r = fk.reference();
        return `${r.columns.map((c) => c.name).join(',')} -> ${r.foreignColumns.map((c) => c.name).join(',')}`;
      })
      .sort(),
  };
}

function tables<T>(schema: Record<string, unknown>, isTable: (v: unknown) => v is T): T[] {
  return Object.values(schema).filter(isTable);
}

describe('Postgres schema (src/db/pg/schema.ts)', () => {
  const pgDialect = new PgDialect();
  const sqliteDialect = new SQLiteSyncDialect();
  const pgTables = new Map(
    tables(pgSchema, (v): v is PgTable => v instanceof PgTable).map((t) => {
      const c = pgTableConfig(t);
      return [c.name, describeTable(c, (s) => pgDialect.sqlToQuery(s).sql)];
    }),
  );
  const sqliteTables = new Map(
    tables(sqliteSchema, (v): v is SQLiteTable => v instanceof SQLiteTable).map((t) => {
      const c = sqliteTableConfig(t);
      return [c.name, describeTable(c, (s) => sqliteDialect.sqlToQuery(s).sql)];
    }),
  );

  it('has every SQLite table, and only the Postgres-only tables besides', () => {
    expect([...pgTables.keys()].filter((n) => !PG_ONLY.includes(n)).sort()).toEqual([...sqliteTables.keys()].sort());
  });

  it.each([...sqliteTables.keys()])('%s: same columns, keys, defaults, indexes and foreign keys', (name) => {
    expect(pgTables.get(name)).toEqual(sqliteTables.get(name));
  });

  it('reads rows of the same types', () => {
    expectTypeOf<typeof pgSchema.threads.$inferSelect>().toEqualTypeOf<sqliteSchema.ThreadRow>();
    expectTypeOf<typeof pgSchema.workItems.$inferSelect>().toEqualTypeOf<sqliteSchema.WorkItemRow>();
    expectTypeOf<typeof pgSchema.ledgerEntries.$inferSelect>().toEqualTypeOf<sqliteSchema.LedgerRow>();
    expectTypeOf<typeof pgSchema.charges.$inferSelect>().toEqualTypeOf<sqliteSchema.ChargeRow>();
    expectTypeOf<typeof pgSchema.documents.$inferSelect>().toEqualTypeOf<sqliteSchema.DocumentRow>();
    expectTypeOf<typeof pgSchema.locks.$inferSelect>().toEqualTypeOf<sqliteSchema.LockRow>();
    expectTypeOf<typeof pgSchema.mutations.$inferSelect>().toEqualTypeOf<sqliteSchema.MutationRow>();
    expectTypeOf<typeof pgSchema.callRecords.$inferSelect>().toEqualTypeOf<sqliteSchema.CallRecordRow>();
    expectTypeOf<typeof pgSchema.responseCache.$inferSelect>().toEqualTypeOf<sqliteSchema.ResponseCacheRow>();
    expectTypeOf<typeof pgSchema.ledgerImports.$inferSelect>().toEqualTypeOf<sqliteSchema.LedgerImportRow>();
    expectTypeOf<typeof pgSchema.ledgerCheckpoints.$inferSelect>().toEqualTypeOf<sqliteSchema.LedgerCheckpointRow>();
    expectTypeOf<typeof pgSchema.schedules.$inferSelect>().toEqualTypeOf<sqliteSchema.ScheduleRow>();
    expectTypeOf<typeof pgSchema.scheduleRuns.$inferSelect>().toEqualTypeOf<sqliteSchema.ScheduleRunRow>();
    expectTypeOf<typeof pgSchema.projects.$inferSelect>().toEqualTypeOf<sqliteSchema.ProjectRow>();
  });
});
