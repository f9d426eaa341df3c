/**
 * U+0000 (NUL) in text. Postgres refuses it in a `text` value (22021, or the whole query when inlined in
 * a simple-protocol query), SQLite stores it. So that both backends hold the same, no NUL is let in at
 * any way in — a request's input (tRPC: router.ts; the HTTP API: http/routes.ts), an imported ledger
 * (ledger/transfer.ts), a model's answer (operations/runtime.ts `checkAnswer`: an invalid answer, whose
 * reasons are kept escaped) — and then no raw text column derived from stored data (a document part's
 * key, a child's idempotency key, a lock scope) can hold one either. The check is made once per way in,
 * on the whole value, never per column. A provider's error message is kept with the NUL escaped instead
 * (engine/classify.ts).
 *
 * The caveat: columns of JSON text (ledger payloads such as a provider's body "as received", a thread's
 * `input` and `target_ref` of an imported ledger) may still hold the six characters `\u0000`, the JSON
 * escape of a NUL, which SQLite's JSON functions read but Postgres's `jsonb` (and `json`'s operators)
 * refuse (22P05). So SQL never casts such a column to jsonb directly: it reads it through
 * db/dialect.ts `jsonText`, which neutralises the escape first.
 */

/** What is wrong with such a value, as error messages say it after the field's path. */
export const NUL_REFUSED = 'holds the character U+0000 (NUL), which combine does not store: remove it';

/**
 * The path of the first string in `value` holding U+0000 (`stories[0].title`; `(root)` for the value
 * itself), or of the object whose field name holds one (` (a field name)` appended); null when there
 * is none. The path never holds the NUL itself, so it can be stored in an error message. The walk keeps
 * its own stack, not the call stack: a value nested as deeply as `JSON.parse` allows (tens of thousands
 * of levels) is walked, never a RangeError.
 */
export function findNul(value: unknown): string | null {
  // Depth first, in document order: each node's children are pushed last to first.
  const stack: Visit[] = [{ value, key: null, parent: null, nulInKey: false }];
  for (let visit = stack.pop(); visit !== undefined; visit = stack.pop()) {
    if (visit.nulInKey) return `${visit.parent === null ? '(root)' : pathOf(visit.parent)} (a field name)`;
    const v = visit.value;
    if (typeof v === 'string') {
      if (v.includes('\0')) return pathOf(visit);
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) if (mayHoldNul(v[i])) stack.push({ value: v[i], key: i, parent: visit, nulInKey: false });
    } else if (typeof v === 'object' && v !== null) {
      const keys = Object.keys(v);
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!;
        const child = (v as Record<string, unknown>)[key];
        const nulInKey = key.includes('\0');
        if (nulInKey || mayHoldNul(child)) stack.push({ value: child, key, parent: visit, nulInKey });
      }
    }
  }
  return null;
}

/**
 * Whether a child is worth a visit: an object or array, or a string holding the NUL (visited in its turn,
 * so the first in document order is named); other strings, numbers, booleans and null are passed over.
 */
function mayHoldNul(value: unknown): boolean {
  return typeof value === 'string' ? value.includes('\0') : typeof value === 'object' && value !== null;
}

/** A node `findNul` walks: its key in its parent (null for the root), and whether that key holds a NUL. */
interface Visit {
  value: unknown;
  key: string | number | null;
  parent: Visit | null;
  nulInKey: boolean;
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
 * Text from outside kept as a message (a provider's error): each U+0000 written as the six characters
 * `\u0000`, so the message is kept, readable, on both backends instead of refused.
 */
export function escapeNul(text: string): string {
  return text.includes('\0') ? text.replaceAll('\0', '\\u0000') : text;
}
