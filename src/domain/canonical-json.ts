/**
 * RFC 8785 canonical JSON: the bytes the ledger hashes, the cache keys on and the story diff compares.
 *
 * The same value always serializes to the same bytes, and to the bytes the `canonicalize` package
 * (2.1.0, which wrote every ledger entry so far) writes: members in the UTF-16 order of their keys,
 * undefined and symbol members left out (null in an array), every string, number and key as
 * JSON.stringify writes it, `toJSON` honoured, NaN and Infinity refused. test/unit/canonical-json.test.ts
 * compares the two on generated values. Written here because the package's serializer — a closure, a
 * key sort with its work array and several intermediate strings per member — was the largest allocator
 * of the engine's ledger append (two of every item's four entries carry the request or the answer).
 */
export function canonicalJson(value: unknown): string {
  const text = serialize(value);
  if (text === undefined) throw new TypeError('value cannot be represented as canonical JSON');
  return text;
}

/** The canonical text of `value`; undefined for what JSON has no text for (undefined, a function, a symbol). */
function serialize(value: unknown): string | undefined {
  if (typeof value === 'number') {
    if (Number.isNaN(value)) throw new Error('NaN is not allowed');
    if (!Number.isFinite(value)) throw new Error('Infinity is not allowed');
    return JSON.stringify(value);
  }
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (toJSON instanceof Function) return serialize(toJSON.call(value));
  return Array.isArray(value) ? serializeArray(value) : serializeObject(value as Record<string, unknown>);
}

function serializeArray(items: readonly unknown[]): string {
  let text = '[';
  for (let i = 0; i < items.length; i++) {
    // A hole is skipped, as Array.prototype.reduce (the package's walk) skips it; JSON data has none.
    if (!(i in items)) continue;
    if (i > 0) text += ',';
    const item = items[i];
    text += item === undefined || typeof item === 'symbol' ? 'null' : `${serialize(item)}`;
  }
  return `${text}]`;
}

function serializeObject(members: Record<string, unknown>): string {
  const keys = sortedKeys(members);
  let text = '{';
  for (const key of keys) {
    const member = members[key];
    if (member === undefined || typeof member === 'symbol') continue;
    text += `${text.length > 1 ? ',' : ''}${JSON.stringify(key)}:${serialize(member)}`;
  }
  return `${text}}`;
}

/**
 * The object's own keys in UTF-16 code unit order (Array.prototype.sort's default order). Most objects
 * are small and many already in order: those are sorted in place by insertion, with no work array.
 */
function sortedKeys(members: object): string[] {
  const keys = Object.keys(members);
  if (keys.length > 16) return keys.sort();
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]!;
    let j = i - 1;
    for (; j >= 0 && keys[j]! > key; j--) keys[j + 1] = keys[j]!;
    keys[j + 1] = key;
  }
  return keys;
}
