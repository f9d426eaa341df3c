/**
 * Short ids people can read, type and paste. A UUIDv7 starts with its creation time, so the first
 * characters of ids made in the same minute are all the same; the short id is taken from the random
 * tail instead (characters 25–32: 32 random bits). Any prefix of the whole id, or of its tail, finds a
 * row again (db/id-prefix.ts), like a git commit's abbreviation.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
/** Where the random tail starts in a UUID's text (0-based; SQL's substr(id, 25) is 1-based). */
const TAIL_START = 24;
const SHORT_LENGTH = 8;
/** Fewer characters match too many rows to be useful (git asks for 4 as well). */
export const MIN_ID_PREFIX = 4;

/** "01a209d3-5c2a-7a13-8f00-9f3c2a1b7e4d" → "9f3c2a1b"; other ids keep their first 8 characters. */
export function shortId(id: string, length = SHORT_LENGTH): string {
  return UUID.test(id) ? id.slice(TAIL_START, TAIL_START + length) : id.slice(0, length);
}

/**
 * Short ids for ids shown together (a table): 8 characters, and longer ones — the whole tail, then the
 * whole id — for the rare ids whose 8 collide, so every row shown can be told apart and typed back.
 */
export function distinctShortIds(ids: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const length of [SHORT_LENGTH, 12]) {
    const byShort = new Map<string, string[]>();
    for (const id of ids) {
      if (out.has(id)) continue;
      const s = shortId(id, length);
      byShort.set(s, [...(byShort.get(s) ?? []), id]);
    }
    for (const [s, group] of byShort) {
      const distinct = new Set(group);
      if (distinct.size === 1) out.set(group[0]!, s);
    }
  }
  for (const id of ids) if (!out.has(id)) out.set(id, id);
  return out;
}

/** The range of ids (or tails) starting with `text`: [text, text with its last character + 1). */
export function prefixRange(text: string): { lo: string; hi: string } {
  const last = text.charCodeAt(text.length - 1);
  return { lo: text, hi: text.slice(0, -1) + String.fromCharCode(last + 1) };
}
