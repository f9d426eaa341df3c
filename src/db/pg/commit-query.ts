/**
 * The one query that ends a Postgres write (db/pg/writer.ts): the statements the closure queued with
 * `Sql.atCommit`, then its notifications, then COMMIT. It is one simple-protocol query — one round trip,
 * nothing of this process in between — so its values go in as escaped literals, not parameters.
 */
import type { SqlParams } from '../../core/sql.js';
import { pgDriver } from './driver.js';
import { endWithNotifications, type Notification } from './notifications.js';
import { bindValues, compileStatement } from './sql.js';

/** A statement queued to run in the COMMIT's query, and who gets its rows once committed. */
export interface CommitStatement {
  readonly text: string;
  readonly params: SqlParams;
  readonly committed: (rows: unknown[]) => void;
}

/**
 * The query text: BEGIN when the transaction has not begun yet (its closure sent no statement: see
 * pg/transaction-sql.ts), each statement (its values inlined), the notifications, COMMIT.
 */
export function commitQuery(statements: readonly CommitStatement[], notes: readonly Notification[], begun: boolean): string {
  const body = [...statements.map((s) => inlineValues(s.text, s.params)), endWithNotifications(notes, 'COMMIT')];
  return (begun ? body : ['BEGIN', ...body]).join(';\n');
}

/**
 * `text` (in the query functions' parameter syntax) with each parameter replaced by its value as a
 * literal. The literals are untyped, as bound parameters are, so the statement's own casts and the
 * function signatures type them. For our own statement texts only: they have no `$` of their own.
 */
export function inlineValues(text: string, params: SqlParams): string {
  const statement = compileStatement(text);
  const values = bindValues(statement, text, params);
  return statement.text.replace(/\$(\d+)/g, (_, n: string) => literal(values[Number(n) - 1]));
}

/** Values as a list of literals (for `EXECUTE name(…)`), or null when one cannot be inlined. */
export function inlineList(values: readonly unknown[]): string | null {
  try {
    return values.map(literal).join(', ');
  } catch {
    return null;
  }
}

function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) return pgDriver().escapeLiteral(arrayText(value));
  if (typeof value === 'string') return pgDriver().escapeLiteral(value);
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return pgDriver().escapeLiteral(String(value));
  throw new TypeError(`a ${typeof value} cannot be inlined into a statement`);
}

/** A one-dimensional array in Postgres's array text form: every element quoted, NULL for null. */
function arrayText(values: readonly unknown[]): string {
  const items = values.map((v) => {
    if (v === null || v === undefined) return 'NULL';
    if (typeof v === 'object') throw new TypeError('only flat arrays of scalars can be inlined into a statement');
    return `"${String(v).replace(/[\\"]/g, '\\$&')}"`;
  });
  return `{${items.join(',')}}`;
}
