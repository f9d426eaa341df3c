/**
 * How our statements go through node-postgres (pg/sql.ts, pg/transaction-sql.ts): as a query object of
 * our own, built from the text and the values, without three of the driver's per-query costs, which were
 * ~7 % of a daemon's main-thread CPU on Postgres (bench/README.md, issue 18 target 9, pgcpu7):
 *   - given a config object, the driver copies it property by property (`Object.getOwnPropertyDescriptors`)
 *     and wraps its promise in a second one;
 *   - the server describes a prepared statement's columns on every run, and the driver builds their
 *     parsers and an empty row anew each time, as a dictionary-mode object (`Object.create(null)`): ~15 µs
 *     for a row of 30 columns, more than the row itself;
 *   - every row is then a copy of that dictionary-mode object.
 * Here a named statement's columns are read once per connection (its parsers and an empty row, a plain
 * object, kept while the server describes the same columns), and each row is a copy of that row filled in
 * column order: the same rows, values and parsers as the driver's own (pg-sql.test.ts compares them). A
 * connection's parsers are read when a statement's columns are first described there: ours are fixed when
 * it opens (connection.ts). Once they are, the statement runs there without a Describe (no RowDescription to
 * build and parse: issue 18 target 9, pgjs). The same goes for the `EXECUTE name(…)` statements of a simple
 * query (a COMMIT's, a BEGIN's), whose columns the server describes each time. Anything else (an unnamed
 * statement, binary columns, a column named `__proto__`) takes the driver's own path.
 *
 * This leans on node-postgres's internals, as pinned in package.json (pg 8.23.1): whoever upgrades pg checks
 * that `Query.prepare(connection)` still sends exactly one `connection.describe` per run, that the
 * connection's `parse`/`bind`/`execute`/`sync` set no property on the connection (the run without a Describe
 * sends them through a view of it made by `Object.create`), and that `handleRowDescription`,
 * `handleDataRow` and `handleCommandComplete` keep their roles. pg-sql.test.ts counts the RowDescriptions.
 */
import type pg from 'pg';
import { pgDriver } from './driver.js';

/** What a handle queries: a pool (one connection per statement) or one checked-out client. */
export type Queryable = pg.Pool | pg.PoolClient | pg.Client;

/** A column as the server describes it (pg-protocol's Field, the parts read here). */
interface Field {
  readonly name: string;
  readonly dataTypeID: number;
  readonly format: string;
}

/** A connection's type parsers (the driver's TypeOverrides over our PG_TYPES, one per connection). */
interface TypeParsers {
  getTypeParser(oid: number, format: string): (raw: string) => unknown;
}

/** A statement's columns as read once: the description they came from, each one's parser, an empty row. */
interface RowShape {
  readonly fields: readonly Field[];
  readonly names: readonly string[];
  readonly parsers: readonly ((raw: string) => unknown)[];
  readonly empty: Readonly<Record<string, null>>;
}

/** Row shapes by statement name, per connection (keyed by the connection's type parsers). */
const shapesByConnection = new WeakMap<TypeParsers, Map<string, RowShape>>();

/** The shape of `name`'s rows as last described on the connection of `types`, if any. */
function knownShape(types: TypeParsers, name: string): RowShape | null {
  return shapesByConnection.get(types)?.get(name) ?? null;
}

/** The shape of `name`'s rows, or null for what the driver's own path takes (binary columns, `__proto__`). */
function rowShape(types: TypeParsers, name: string, fields: readonly Field[]): RowShape | null {
  let shapes = shapesByConnection.get(types);
  if (!shapes) {
    shapes = new Map();
    shapesByConnection.set(types, shapes);
  }
  const known = shapes.get(name);
  // Defensive: the server refuses a prepared statement whose result type changed, and a name is never reused for
  // another text; checked anyway, at the cost of a comparison per description.
  if (known !== undefined && sameColumns(known.fields, fields)) return known;
  if (fields.some((f) => f.format === 'binary' || f.name === '__proto__')) return null;
  const empty: Record<string, null> = {};
  for (const f of fields) empty[f.name] = null;
  const shape: RowShape = {
    fields,
    names: fields.map((f) => f.name),
    parsers: fields.map((f) => types.getTypeParser(f.dataTypeID, f.format || 'text')),
    empty,
  };
  shapes.set(name, shape);
  return shape;
}

function sameColumns(a: readonly Field[], b: readonly Field[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    if (a[i]!.name !== b[i]!.name || a[i]!.dataTypeID !== b[i]!.dataTypeID || a[i]!.format !== b[i]!.format) return false;
  }
  return true;
}

/** The parts of the driver's Query (pg/lib/query.js) this class uses and overrides. */
interface DriverQuery {
  name?: string;
  callback?: (err: Error | undefined, result: pg.QueryResult) => void;
  _result: { fields: readonly Field[]; _types: TypeParsers; addRow(row: unknown): void };
  _canceledDueToError: unknown;
  _accumulateRows: boolean;
  _checkForMultirow(): void;
  handleRowDescription(msg: { fields: Field[] }): void;
  prepare(connection: DriverConnection): void;
  hasBeenParsed(connection: DriverConnection): boolean;
  handleDataRow(msg: { fields: (string | null)[] }): void;
  handleCommandComplete(msg: unknown, connection: unknown): void;
  emit(event: string, ...args: unknown[]): boolean;
  listenerCount(event: string): number;
}
/** The driver's connection (pg/lib/connection.js): what its Query's `prepare` sends the messages of a run with. */
interface DriverConnection {
  describe(msg: unknown): void;
}

/**
 * `connection` as its Query's `prepare` sees it, but sending no Describe: one per connection, made once (a
 * view of the connection, whose messages and stream are the connection's own).
 */
const withoutDescribe = new WeakMap<DriverConnection, DriverConnection>();
function withoutDescribing(connection: DriverConnection): DriverConnection {
  let view = withoutDescribe.get(connection);
  if (!view) {
    view = Object.create(connection, { describe: { value: () => {} } }) as DriverConnection;
    withoutDescribe.set(connection, view);
  }
  return view;
}

interface OurQuery extends DriverQuery {
  /**
   * Whose columns each statement's rows are, in the query's order: the statement's name, or the name it runs
   * as by EXECUTE in a simple query; undefined for the driver's own path.
   */
  shapeKeys: readonly (string | undefined)[];
}
type DriverQueryClass = new (text: string, values?: unknown[]) => DriverQuery;

let statementQuery: (new (text: string, values?: unknown[]) => OurQuery) | null = null;

/** The query class, made once the driver is loaded (pg/driver.ts loads it on first use). */
function statementQueryClass(): new (text: string, values?: unknown[]) => OurQuery {
  statementQuery ??= class StatementQuery extends (pgDriver().Query as unknown as DriverQueryClass) {
    private shape: RowShape | null = null;
    shapeKeys: readonly (string | undefined)[] = [];
    /** The statements of the query the server has completed (each ends with one CommandComplete). */
    private completed = 0;

    /**
     * A named statement already prepared on this connection, whose columns were described there, runs without
     * a Describe: the server then sends no RowDescription, ~10 per item, for it to build and this process to
     * parse (~1 % of a daemon's main thread at 3 daemons, pgjs). Its rows are read with the shape described
     * before: a prepared statement's columns never change (the server refuses to run it if a schema change
     * would change them, and the connection that saw the refusal is closed, its shapes with it: pg/sql.ts,
     * pg/writer.ts, db/errors.ts `isStalePreparedStatement`).
     */
    override prepare(connection: DriverConnection): void {
      const key = this.shapeKeys[0];
      const shape = key === undefined ? null : knownShape(this._result._types, key);
      if (shape === null || !this.hasBeenParsed(connection)) {
        super.prepare(connection);
        return;
      }
      this.shape = shape;
      this._result.fields = shape.fields;
      this._accumulateRows = this.callback !== undefined || this.listenerCount('row') === 0;
      super.prepare(withoutDescribing(connection));
    }

    override handleRowDescription(msg: { fields: Field[] }): void {
      const key = this.shapeKeys[this.completed];
      this.shape = key === undefined ? null : rowShape(this._result._types, key, msg.fields);
      if (this.shape === null) {
        super.handleRowDescription(msg);
        return;
      }
      // As the driver's own: a new result for each statement of a query; rows kept unless streamed to a listener.
      this._checkForMultirow();
      this._result.fields = msg.fields;
      this._accumulateRows = this.callback !== undefined || this.listenerCount('row') === 0;
    }

    override handleDataRow(msg: { fields: (string | null)[] }): void {
      const shape = this.shape;
      if (shape === null) {
        super.handleDataRow(msg);
        return;
      }
      if (this._canceledDueToError) return;
      const row: Record<string, unknown> = { ...shape.empty };
      try {
        for (let i = 0; i < msg.fields.length; i++) {
          const raw = msg.fields[i]!;
          row[shape.names[i]!] = raw === null ? null : shape.parsers[i]!(raw);
        }
      } catch (err) {
        // As the driver's own: a value its parser refused fails the query once the server is done with it.
        this._canceledDueToError = err;
        return;
      }
      this.emit('row', row, this._result);
      if (this._accumulateRows) this._result.addRow(row);
    }

    override handleCommandComplete(msg: unknown, connection: unknown): void {
      super.handleCommandComplete(msg, connection);
      this.shape = null;
      this.completed++;
    }
  };
  return statementQuery;
}

/**
 * Runs `text` (with `$n` placeholders) with `values` on `target`, as the prepared statement `name` (parsed once
 * per connection, then only bound and run), or unnamed.
 */
export function submitStatement(target: Queryable, name: string | undefined, text: string, values: unknown[]): Promise<pg.QueryResult> {
  const query = new (statementQueryClass())(text, values);
  // Read when the query is sent, as a config object's name would be.
  query.name = name;
  query.shapeKeys = [name];
  return submit(target, query);
}

/**
 * Runs `text` in the simple protocol on `client` (no parameters: several statements in one query), the rows
 * of its `i`th statement read as those of the prepared statement `shapes[i]` (`EXECUTE name(…)`: pg/transaction-sql.ts,
 * pg/commit-query.ts; undefined: the driver's own path).
 */
export function submitSimple(client: pg.PoolClient, text: string, shapes: readonly (string | undefined)[]): Promise<pg.QueryResult | pg.QueryResult[]> {
  const query = new (statementQueryClass())(text);
  query.shapeKeys = shapes;
  return submit(client, query) as Promise<pg.QueryResult | pg.QueryResult[]>;
}

/**
 * The query's outcome on `target`, a connection or a pool. The callback is given as an argument, not set on the
 * query: a pool wraps it to give its connection back first (one set on the query would bypass that, and the pool
 * would run dry).
 */
function submit(target: Queryable, query: DriverQuery): Promise<pg.QueryResult> {
  return new Promise((resolve, reject) => {
    const send = target.query as (this: Queryable, q: unknown, cb: (err: Error | undefined, r: pg.QueryResult) => void) => void;
    send.call(target, query, (err, result) => (err ? reject(err) : resolve(result)));
  });
}
