/**
 * The Postgres schema mirrors the SQLite one: same tables, columns, keys, indexes (with their partial
 * conditions and expressions) and row types, so storage code reads the same rows from either backend. A
 * change to src/db/schema.ts or src/db/schema-schedules.ts that is not made to src/db/pg/ fails here.
 */
import { getTableConfig as pgTableConfig, PgDialect, PgTable } from 'drizzle-orm/pg-core';
import { getTableConfig as sqliteTableConfig, SQLiteSyncDialect, SQLiteTable } from 'drizzle-orm/sqlite-core';
import { SQL } from 'drizzle-orm';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as pgSchemaTables from '../../src/db/pg/schema.js';
import * as pgScheduleTables from '../../src/db/pg/schema-schedules.js';
import * as sqliteSchemaTables from '../../src/db/schema.js';
import * as sqliteScheduleTables from '../../src/db/schema-schedules.js';

const pgSchema = { ...pgSchemaTables, ...pgScheduleTables };
const sqliteSchema = { ...sqliteSchemaTables, ...sqliteScheduleTables };

/** Tables only Postgres has: the chain head that serializes appends across daemons, the shared rate limiter, the daemons' registry. */
const PG_ONLY = ['llm_ledger_head', 'llm_rate_limits', 'llm_daemons'];

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
        // A column, or an expression (the id-tail indexes' `substr(id, 25)`) rendered in its dialect.
        columns: i.config.columns.map((c) => (c instanceof SQL ? render(c) : (c as { name: string }).name)),
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

describe('Postgres schema (src/db/pg/)', () => {
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
    expectTypeOf<typeof pgSchemaTables.threads.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.ThreadRow>();
    expectTypeOf<typeof pgSchemaTables.workItems.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.WorkItemRow>();
    expectTypeOf<typeof pgSchemaTables.ledgerEntries.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.LedgerRow>();
    expectTypeOf<typeof pgSchemaTables.charges.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.ChargeRow>();
    expectTypeOf<typeof pgSchemaTables.documents.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.DocumentRow>();
    expectTypeOf<typeof pgSchemaTables.locks.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.LockRow>();
    expectTypeOf<typeof pgSchemaTables.mutations.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.MutationRow>();
    expectTypeOf<typeof pgSchemaTables.responseCache.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.ResponseCacheRow>();
    expectTypeOf<typeof pgSchemaTables.ledgerImports.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.LedgerImportRow>();
    expectTypeOf<typeof pgSchemaTables.ledgerCheckpoints.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.LedgerCheckpointRow>();
    expectTypeOf<typeof pgScheduleTables.schedules.$inferSelect>().toEqualTypeOf<sqliteScheduleTables.ScheduleRow>();
    expectTypeOf<typeof pgScheduleTables.scheduleRuns.$inferSelect>().toEqualTypeOf<sqliteScheduleTables.ScheduleRunRow>();
    expectTypeOf<typeof pgSchemaTables.projects.$inferSelect>().toEqualTypeOf<sqliteSchemaTables.ProjectRow>();
  });
});
