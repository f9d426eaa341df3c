/**
 * U+0000 (NUL) in text. Postgres refuses it in a `text` value (22021, or the whole query when inlined in
 * a simple-protocol query), SQLite stores it. So that both backends hold the same, no NUL is let in at
 * any way in — a request's input (tRPC: router.ts; the HTTP API: http/routes.ts), an imported ledger
 * (ledger/transfer.ts), a model's answer (operations/runtime.ts `checkAnswer`: an invalid answer) — and
 * then no value derived from stored data (a document part's key, a child's idempotency key, a lock
 * scope) can hold one either. The check is made once per way in, on the whole value, never per column.
 * A provider's error message is kept with the NUL escaped instead (engine/classify.ts).
 */

/** What is wrong with such a value, as error messages say it after the field's path. */
export const NUL_REFUSED = 'holds the character U+0000 (NUL), which combine does not store: remove it';

/**
 * The path of the first string in `value` holding U+0000 (`stories[0].title`; `(root)` for the value
 * itself), or of the object whose field name holds one (` (a field name)` appended); null when there
 * is none. The path never holds the NUL itself, so it can be stored in an error message.
 */
export function findNul(value: unknown, path = ''): string | null {
  if (typeof value === 'string') return value.includes('\0') ? path || '(root)' : null;
  if (typeof value !== 'object' || value === null) return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findNul(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  for (const key of Object.keys(value)) {
    if (key.includes('\0')) return `${path || '(root)'} (a field name)`;
    const found = findNul((value as Record<string, unknown>)[key], path === '' ? key : `${path}.${key}`);
    if (found !== null) return found;
  }
  return null;
}

/**
 * Text from outside kept as a message (a provider's error): each U+0000 written as the six characters
 * `\u0000`, so the message is kept, readable, on both backends instead of refused.
 */
export function escapeNul(text: string): string {
  return text.includes('\0') ? text.replaceAll('\0', '\\u0000') : text;
}
