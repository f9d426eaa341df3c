/**
 * The one query that ends a Postgres write (db/pg/writer.ts): the statements the closure queued with
 * `Sql.atCommit`, then its notifications, then COMMIT. It is one simple-protocol query — one round trip,
 * nothing of this process in between — so its values go in as literals (quoted or dollar-quoted:
 * `quoteLiteral`), not parameters.
 *
 * The simple protocol parses, analyses and plans every statement of every query anew: ~12 plans per item,
 * ~12 % of the server's CPU on the engine's path (bench/README.md, issue 18 target 9, pgcpu5). So each
 * statement is prepared once per connection (SQL `PREPARE`, in the COMMIT query where it first runs there)
 * and then runs as `EXECUTE name(literals)`, as BEGIN's statement does (pg/transaction-sql.ts): the server
 * reuses its plan, and the literals take the types the statement's parameters were prepared with.
 */
import { RefusedValueError } from '../../core/errors.js';
import type { SqlParams } from '../../core/sql.js';
import type { Notification } from './notifications.js';
import { bindValues, compileStatement } from './sql.js';

/** A statement queued to run in the COMMIT's query, and who gets its rows once committed. */
export interface CommitStatement {
  readonly text: string;
  readonly params: SqlParams;
  readonly committed: (rows: unknown[]) => void;
}

/** The COMMIT query, where each queued statement's rows are in its results, and whether it prepares statements. */
export interface CommitQuery {
  readonly text: string;
  /** Index in the query's results of each queued statement's result, in queue order. */
  readonly resultIndex: readonly number[];
  /**
   * Names this query prepares on its connection, noted as prepared there before it is sent. If the query
   * fails, a PREPARE behind the failed statement never ran (one that ran stays: a rollback does not undo
   * PREPARE), so the writer closes the connection rather than EXECUTE a name it does not hold.
   */
  readonly preparing: readonly string[];
  /** Per statement of the query, in order, the prepared statement whose rows it returns (`EXECUTE name_c`), if any. */
  readonly shapes: readonly (string | undefined)[];
}

/**
 * SQL-prepared statement names on each connection. Apart from the driver's own (protocol-level) names,
 * which it tracks itself and would refuse to prepare again: ours end in `_c`.
 */
const preparedForCommit = new WeakMap<object, Set<string>>();

/** The notifications, as one statement for any number of them (one prepared plan). */
const NOTIFY =
  'SELECT pg_notify(n.channel, n.payload) FROM unnest(@channels::text[], @payloads::text[]) WITH ORDINALITY AS n(channel, payload, i) ORDER BY n.i';

/**
 * The query on `connection`: BEGIN when the transaction has not begun yet (its closure sent no statement:
 * see pg/transaction-sql.ts), each statement, the notifications (delivered at this COMMIT; Postgres drops
 * duplicates within a transaction), COMMIT.
 */
export function commitQuery(connection: object, statements: readonly CommitStatement[], notes: readonly Notification[], begun: boolean): CommitQuery {
  let prepared = preparedForCommit.get(connection);
  if (!prepared) {
    prepared = new Set();
    preparedForCommit.set(connection, prepared);
  }
  const parts: string[] = begun ? [] : ['BEGIN'];
  const resultIndex: number[] = [];
  const preparing: string[] = [];
  const shapes: (string | undefined)[] = begun ? [] : [undefined];
  const add = (text: string, params: SqlParams): void => {
    try {
      addStatement(text, params);
    } catch (err) {
      // quoteLiteral's refusal knows the value only: name the statement that holds it (our SQL, no values).
      if (err instanceof RefusedValueError) throw new RefusedValueError(err.sqlstate, `${NUL_IN_LITERAL}, in ${statementHead(text)}`, err);
      throw err;
    }
  };
  const addStatement = (text: string, params: SqlParams): void => {
    const statement = compileStatement(text);
    const values = bindValues(statement, text, params);
    const list = statement.name === undefined ? null : inlineList(values);
    if (list === null) {
      parts.push(inlineValues(text, params));
      shapes.push(undefined);
      return;
    }
    const name = `${statement.name}_c`;
    if (!prepared.has(name)) {
      parts.push(`PREPARE ${name} AS ${statement.text}`);
      shapes.push(undefined);
      preparing.push(name);
      prepared.add(name);
    }
    parts.push(statement.count === 0 ? `EXECUTE ${name}` : `EXECUTE ${name}(${list})`);
    shapes.push(name);
  };
  for (const s of statements) {
    add(s.text, s.params);
    resultIndex.push(parts.length - 1);
  }
  if (notes.length > 0) {
    add(NOTIFY, { channels: notes.map((n) => n.channel), payloads: notes.map((n) => n.payload) });
  }
  parts.push('COMMIT');
  shapes.push(undefined);
  return { text: parts.join(';\n'), resultIndex, preparing, shapes };
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
  if (typeof value === 'string') return quoteLiteral(value);
  if (Array.isArray(value)) return quoteLiteral(arrayText(value));
  // A number's, a bigint's or a boolean's text has no quote or backslash to escape.
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') return `'${value}'`;
  throw new TypeError(`a ${typeof value} cannot be inlined into a statement`);
}

const NUL_IN_LITERAL = 'a text value holds the character U+0000 (NUL), which Postgres does not store';

/** A statement's first words, to name it in an error: `INSERT INTO llm_ledger_entries …`. */
function statementHead(text: string): string {
  const flat = text.trim().replace(/\s+/g, ' ');
  return flat.length > 60 ? `the statement "${flat.slice(0, 60)}…"` : `the statement "${flat}"`;
}

/**
 * Dollar quoting's tag: a value that holds it (or ends with its head, which the closing tag would complete)
 * is quoted with escapes instead.
 */
const DOLLAR_TAG = '$lit$';
const DOLLAR_TAG_HEAD = '$lit';

/**
 * `value` as a string literal the server reads back as `value`. A value without a quote or a backslash
 * goes in as it is, between single quotes; any other is dollar-quoted (`$lit$…$lit$`), which the server
 * reads verbatim whatever `standard_conforming_strings` says, so nothing in it is copied to be escaped:
 * the COMMIT query inlines every ledger payload this way (JSON, quotes and backslashes all through), and
 * escaping those copies was ~2 % of a daemon's main thread on Postgres at 3 daemons, a fifth of the
 * bytes it allocated per item (bench/README.md, issue 18 target 9, pgjs). A value holding the tag is
 * escaped as node-postgres's `escapeLiteral` does (quotes and backslashes doubled, ` E'…'` when there is
 * a backslash). A value holding a NUL is a RefusedValueError.
 */
export function quoteLiteral(value: string): string {
  // A NUL ends the query's text on the server, which then refuses the whole query as a broken message
  // (08P01, a connection exception to isInfraPgError): refused here instead, as the value it is.
  if (value.includes('\0')) throw new RefusedValueError('22021', NUL_IN_LITERAL);
  const backslash = value.includes('\\');
  const quote = value.includes("'");
  if (!backslash && !quote) return `'${value}'`;
  // After a space, as escapeLiteral's ` E'…'`: `$` continues an identifier, so the tag must not follow one.
  if (!value.includes(DOLLAR_TAG) && !value.endsWith(DOLLAR_TAG_HEAD)) return ` ${DOLLAR_TAG}${value}${DOLLAR_TAG}`;
  let body = backslash ? value.replaceAll('\\', '\\\\') : value;
  if (quote) body = body.replaceAll("'", "''");
  return backslash ? ` E'${body}'` : `'${body}'`;
}

/** A one-dimensional array in Postgres's array text form: every element quoted, NULL for null. */
function arrayText(values: readonly unknown[]): string {
  const items: string[] = [];
  for (const v of values) items.push(elementText(v));
  return `{${items.join(',')}}`;
}

/** An array element's text (a module function: docs/design-notes.md "Closures made per call"). */
function elementText(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'object') throw new TypeError('only flat arrays of scalars can be inlined into a statement');
  return quotedElement(String(v));
}

/**
 * A code unit JSON.stringify may write otherwise than with a backslash before `"` and `\`: a control character
 * (below U+0020) or a surrogate (U+D800–U+DFFF; a lone one is escaped), i.e. any outside these two ranges.
 */
const JSON_ESCAPED_OTHERWISE = /[^ -\ud7ff\ue000-\uffff]/;

/**
 * An array element between double quotes, with a backslash before each backslash and double quote. For
 * any text without control characters or surrogates that is JSON.stringify's very output, written in one
 * native pass (JSON payloads are array elements, quotes all through: two `replaceAll` passes per element
 * took ~10× as long and allocated a fifth of a daemon's bytes per item, pgjs). Others, one pass here.
 */
function quotedElement(value: string): string {
  if (!JSON_ESCAPED_OTHERWISE.test(value)) return JSON.stringify(value);
  let escaped = '';
  let from = 0;
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === DOUBLE_QUOTE || c === BACKSLASH) {
      escaped += `${value.slice(from, i)}\\`;
      from = i;
    }
  }
  return `"${escaped}${value.slice(from)}"`;
}

const DOUBLE_QUOTE = 0x22;
const BACKSLASH = 0x5c;
