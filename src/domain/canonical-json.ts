/** RFC 8785 canonical JSON: the bytes the ledger hashes, the cache keys on and the story diff compares. */
import canonicalizeModule from 'canonicalize';

// The package is CommonJS (`module.exports = fn`) but its types declare an ES default export.
const canonicalize = canonicalizeModule as unknown as (value: unknown) => string | undefined;

/** The same value always serializes to the same bytes. */
export function canonicalJson(value: unknown): string {
  const text = canonicalize(value);
  if (text === undefined) throw new TypeError('value cannot be represented as canonical JSON');
  return text;
}
