/**
 * A Postgres write's handle on its connection (db/pg/writer.ts): the transaction's BEGIN rides in front
 * of its first statement instead of costing a round trip of its own (one of ~12 per item on the engine's
 * path; each costs ~0.1 ms of client and of server CPU, however little the server does for it).
 *
 * BEGIN can share a query with a statement only in the simple protocol, which has no parameters and
 * no named statements. So when the first statement is already prepared on this connection (it ran here
 * before: a connection parses each statement once, pg/sql.ts), the query is `BEGIN; EXECUTE name(…)`
 * with the values as literals, and the server runs its prepared plan; the literals take the types the
 * statement's parameters were prepared with. Otherwise (its first run here, or a value that cannot be a
 * literal) BEGIN goes first in a query of its own, and the statement is sent only once BEGIN has
 * succeeded: the driver does not pipeline queries anyway, and a statement queued behind a BEGIN that
 * failed would run outside any transaction (autocommit), committing alone what the closure meant to be
 * all-or-nothing.
 * A write that sends no statement at all begins in its COMMIT query (`begun`).
 */
import type pg from 'pg';
import type { SqlParams } from '../../core/sql.js';
import { inlineList } from './commit-query.js';
import { bindValues, type CompiledStatement, compileStatement, PgSql } from './sql.js';
import { submitSimple, submitStatement } from './statement-query.js';

/** The statement names known to be prepared on each connection (each one's first run there prepared it). */
const preparedOn = new WeakMap<pg.PoolClient, Set<string>>();

export class PgTransactionSql extends PgSql {
  private sentBegin = false;
  /** BEGIN sent on its own and not yet answered: statements wait for it (never in autocommit before it). */
  private beginning: Promise<unknown> | null = null;
  private readonly prepared: Set<string>;

  constructor(private readonly client: pg.PoolClient) {
    super(client);
    let names = preparedOn.get(client);
    if (!names) {
      names = new Set();
      preparedOn.set(client, names);
    }
    this.prepared = names;
  }

  /** Whether BEGIN has been sent (with or before a statement). */
  get begun(): boolean {
    return this.sentBegin;
  }

  protected override query(text: string, params: SqlParams | undefined): Promise<pg.QueryResult> {
    const s = compileStatement(text);
    const values = bindValues(s, text, params);
    // A statement the closure starts while BEGIN is on its own is sent after it succeeded, in call order.
    if (this.beginning !== null) return this.beginning.then(() => this.execute(s, values));
    if (this.sentBegin) return this.execute(s, values);
    // Set before anything is sent: a statement the closure starts meanwhile is queued after this one.
    this.sentBegin = true;
    const inline = s.name !== undefined && this.prepared.has(s.name) ? inlineList(values) : null;
    if (inline === null) {
      const beginning = this.client.query('BEGIN');
      this.beginning = beginning;
      // Cleared once BEGIN settled, so later statements go straight out (a failed BEGIN fails them all).
      beginning.then(
        () => (this.beginning = null),
        () => undefined,
      );
      return beginning.then(() => this.execute(s, values));
    }
    const call = s.count === 0 ? `EXECUTE ${s.name}` : `EXECUTE ${s.name}(${inline})`;
    return submitSimple(this.client, `BEGIN;\n${call}`, [undefined, s.name]).then((results) => (results as pg.QueryResult[])[1]!);
  }

  /** The statement as a named prepared statement (unnamed once the statement cache is full), noted as prepared here. */
  private execute(s: CompiledStatement, values: unknown[]): Promise<pg.QueryResult> {
    const name = s.name;
    if (name === undefined || this.prepared.has(name)) return submitStatement(this.client, s.name, s.text, values);
    return submitStatement(this.client, s.name, s.text, values).then((result) => {
      this.prepared.add(name);
      return result;
    });
  }
}
