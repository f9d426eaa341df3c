/**
 * Text that both backends store as it was given. Two kinds of string are not:
 * - U+0000 (NUL): Postgres refuses it in a `text` value (22021, or the whole query when inlined in a
 *   simple-protocol query); SQLite stores it.
 * - An unpaired UTF-16 surrogate (a lone U+D800–U+DFFF: what the JSON escape `\ud800` alone parses to): not
 *   text in UTF-8, the encoding both backends store. The Postgres driver writes it as U+FFFD (so two different
 *   idempotency keys or part keys could become one), SQLite as bytes that are not UTF-8 and read back as
 *   three U+FFFD: either way not what was written, nor what a ledger entry's hash was taken over.
 * So that both backends hold what was given, neither is let in at any way in — a request's input (tRPC:
 * router.ts; the HTTP API: http/routes.ts), an imported ledger (ledger/transfer.ts), the config file, a
 * model's answer (operations/runtime.ts `checkAnswer`: an invalid answer, whose reasons are kept escaped) —
 * and then no raw text column derived from stored data (a document part's key, a child's idempotency key, a
 * lock scope) can hold one either. The check is made once per way in, on the whole value, never per column.
 * A provider's error message is kept instead, its NUL escaped and half a surrogate pair made U+FFFD
 * (`storableMessage`, engine/classify.ts).
 *
 * The caveat: columns of JSON text (ledger payloads such as a provider's body "as received", a thread's
 * `input` and `target_ref` of an imported ledger) may still hold the six characters `\u0000`, the JSON
 * escape of a NUL, which SQLite's JSON functions read but Postgres's `jsonb` (and `json`'s operators)
 * refuse (22P05). So SQL never casts such a column to jsonb directly: it reads it through
 * db/dialect.ts `jsonText`, which neutralises the escape first. The escape of half a surrogate pair (`\ud83d`
 * alone: `JSON.stringify` writes a lone surrogate that way, e.g. in a provider's body) is stored as the
 * six characters it is, and `jsonb` refuses it too (22P02): `jsonText` neutralises it alike.
 */

/** What is wrong with a value holding U+0000, as error messages say it after the field's path. */
export const NUL_REFUSED = 'holds the character U+0000 (NUL), which combine does not store: remove it';

/** What is wrong with a value holding half a surrogate pair, as error messages say it after the field's path. */
export const UNPAIRED_SURROGATE_REFUSED =
  'holds half of a UTF-16 surrogate pair (a lone U+D800–U+DFFF, as the JSON escape \\ud800 alone), which is not text: send the whole character';

/** Why a string cannot be stored as given (NUL_REFUSED or UNPAIRED_SURROGATE_REFUSED), or null. */
export function textProblem(text: string): string | null {
  if (text.includes('\0')) return NUL_REFUSED;
  return text.isWellFormed() ? null : UNPAIRED_SURROGATE_REFUSED;
}

/** Where the first such string is in a value, and what is wrong with it. */
export interface UnstorableText {
  /** `stories[0].title`; `(root)` for the value itself; ` (a field name)` appended when a key holds it. Never holds the text itself. */
  path: string;
  /** NUL_REFUSED or UNPAIRED_SURROGATE_REFUSED. */
  problem: string;
  /** The same as a reason code (a refused request's `reason`). */
  code: UnstorableTextCode;
}

export type UnstorableTextCode = 'NUL_IN_TEXT' | 'UNPAIRED_SURROGATE_IN_TEXT';

const CODES: Record<string, UnstorableTextCode> = { [NUL_REFUSED]: 'NUL_IN_TEXT', [UNPAIRED_SURROGATE_REFUSED]: 'UNPAIRED_SURROGATE_IN_TEXT' };

/**
 * The first string in `value` that cannot be stored as given, in document order, or the object whose field
 * name is one; null when there is none. The walk keeps its own stack, not the call stack: a value nested as
 * deeply as `JSON.parse` allows (tens of thousands of levels) is walked, never a RangeError.
 */
export function findUnstorableText(value: unknown): UnstorableText | null {
  // Depth first, in document order: each node's children are pushed last to first.
  const stack: Visit[] = [{ value, key: null, parent: null, keyProblem: null }];
  for (let visit = stack.pop(); visit !== undefined; visit = stack.pop()) {
    if (visit.keyProblem !== null) {
      return { path: `${visit.parent === null ? '(root)' : pathOf(visit.parent)} (a field name)`, problem: visit.keyProblem, code: CODES[visit.keyProblem]! };
    }
    const v = visit.value;
    if (typeof v === 'string') {
      const problem = textProblem(v);
      if (problem !== null) return { path: pathOf(visit), problem, code: CODES[problem]! };
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) if (mayBeUnstorable(v[i])) stack.push({ value: v[i], key: i, parent: visit, keyProblem: null });
    } else if (typeof v === 'object' && v !== null) {
      const keys = Object.keys(v);
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!;
        const child = (v as Record<string, unknown>)[key];
        const keyProblem = textProblem(key);
        if (keyProblem !== null || mayBeUnstorable(child)) stack.push({ value: child, key, parent: visit, keyProblem });
      }
    }
  }
  return null;
}

/** A lone surrogate's JSON escape (`\ud800`–`\udfff`): a paired one matches too, and is then walked for nothing. */
const SURROGATE_ESCAPE = /\\u[dD][89a-fA-F]/;

/**
 * Whether JSON text may parse to a value `findUnstorableText` refuses: a NUL is there only as the escape
 * `\u0000` (JSON.parse refuses a raw one in a string), a lone surrogate as its escape or raw. Text without
 * them is not walked.
 */
export function mayHoldUnstorableText(json: string): boolean {
  return json.includes('\\u0000') || SURROGATE_ESCAPE.test(json) || !json.isWellFormed();
}

/**
 * Whether a child is worth a visit: an object or array, or a string that cannot be stored (visited in its
 * turn, so the first in document order is named); other strings, numbers, booleans and null are passed over.
 */
function mayBeUnstorable(value: unknown): boolean {
  return typeof value === 'string' ? textProblem(value) !== null : typeof value === 'object' && value !== null;
}

/** A node `findUnstorableText` walks: its key in its parent (null for the root), and what is wrong with that key. */
interface Visit {
  value: unknown;
  key: string | number | null;
  parent: Visit | null;
  keyProblem: string | null;
}

/** The path of a node, written like the schema errors: `a.b[2].c`, `(root)` for the root. */
function pathOf(visit: Visit): string {
  const keys: (string | number)[] = [];
  for (let at: Visit | null = visit; at !== null && at.key !== null; at = at.parent) keys.push(at.key);
  let path = '';
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i]!;
    path = typeof key === 'number' ? `${path}[${key}]` : path === '' ? key : `${path}.${key}`;
  }
  return path === '' ? '(root)' : path;
}

/**
 * Text from outside kept as a message (a provider's error, an operation's exception, an invalid answer's
 * reasons): each U+0000 written as the six characters `\u0000` and half a surrogate pair as U+FFFD, so the
 * message is kept, readable, and stored as it reads on both backends instead of refused.
 */
export function storableMessage(text: string): string {
  const escaped = text.includes('\0') ? text.replaceAll('\0', '\\u0000') : text;
  return escaped.isWellFormed() ? escaped : escaped.toWellFormed();
}
