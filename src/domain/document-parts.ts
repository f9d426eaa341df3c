/**
 * A document stored in parts (an operation's `parts` declaration, api.ts): `content[field]` is an array
 * of objects each named by its string `key` field, stored one row per element, in an order of their own
 * (`ord`, a number between its neighbours'); the rest of the document (the "head", with `field` set to
 * []) is stored on the document's row, with its version. A mutation that changes one element writes
 * that element and the head: its cost does not grow with the number of elements.
 *
 * What changed is found by identity: stored documents are parsed once per version and frozen, so an
 * element an operation's `apply` kept is the same object in the next content. This module plans the
 * writes (pure); src/db/document-parts.ts stores them and puts a document back together.
 */

export interface PartsLayout {
  field: string;
  key: string;
}

/** The most characters of an element's key. */
export const PART_KEY_CHARS = 200;

/** The placeholder of `field` in a head being filled in (see assembleDocumentText). */
const SENTINEL = '\u0000combine:parts\u0000';

/** A content with `layout.field` an array: its elements, and the rest (the head, with [] there). */
export interface Split {
  head: Record<string, unknown>;
  elements: readonly unknown[];
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `content` split at `layout.field`, or null when it has no array there (it is then stored whole). */
export function splitDocument(content: unknown, layout: PartsLayout): Split | null {
  if (!isPlainObject(content) || !Array.isArray(content[layout.field])) return null;
  return { head: { ...content, [layout.field]: [] }, elements: content[layout.field] as unknown[] };
}

/** New elements between two kept ones (keys; null at either end of the array). */
export interface InsertedRun {
  after: string | null;
  before: string | null;
  parts: { key: string; text: string }[];
}

export type PartsPlan =
  | {
      kind: 'incremental';
      head: string;
      /** Kept elements whose content changed: written in place, keeping their order. */
      changed: { key: string; text: string }[];
      inserted: InsertedRun[];
      removed: string[];
      /** How much the parts' characters change. */
      charsDelta: number;
      count: number;
    }
  | { kind: 'rewrite'; head: string; parts: { key: string; text: string }[]; chars: number; count: number };

/** An element's key, or undefined when it is not an object with a usable key. */
function keyOf(element: unknown, layout: PartsLayout): string | undefined {
  const k = isPlainObject(element) ? element[layout.key] : undefined;
  return typeof k === 'string' && k.length <= PART_KEY_CHARS ? k : undefined;
}

/**
 * Every element written again (the first write in parts, or an order the stored one cannot keep), or
 * null when an element is not an object with a unique key (the content is then stored whole).
 */
export function rewritePlan(next: Split, layout: PartsLayout): (PartsPlan & { kind: 'rewrite' }) | null {
  const seen = new Set<string>();
  const parts: { key: string; text: string }[] = [];
  let chars = 0;
  for (const e of next.elements) {
    const key = keyOf(e, layout);
    if (key === undefined || seen.has(key)) return null;
    seen.add(key);
    const text = JSON.stringify(e);
    chars += text.length;
    parts.push({ key, text });
  }
  return { kind: 'rewrite', head: JSON.stringify(next.head), parts, chars, count: parts.length };
}

/** Element `i`'s value at `key`: undefined unless the element is a plain object (module functions: docs/design-notes.md "Closures made per call"). */
export function elementKey(elements: readonly unknown[], key: string, i: number): unknown {
  const element = elements[i];
  return isPlainObject(element) ? element[key] : undefined;
}

/** Each element's index by its value at `key` (`elementKey`). */
export function keyIndex(elements: readonly unknown[], key: string): Map<unknown, number> {
  const index = new Map<unknown, number>();
  for (let p = 0; p < elements.length; p++) index.set(elementKey(elements, key, p), p);
  return index;
}

/** A stored element's key: stored elements are objects with unique string keys. */
function storedKey(elements: readonly unknown[], key: string, i: number): string {
  return elementKey(elements, key, i) as string;
}

/**
 * The writes that take `previous` (the stored content, stored in parts by `layout`; its elements have
 * unique keys) to `next`, or null when `next` cannot be stored in parts. One walk over both arrays,
 * comparing elements by identity: the work beyond that is the changed elements'. Elements that existed
 * before keep their order among themselves, or every element is written again.
 */
export function planParts(previous: Split | null, next: Split, layout: PartsLayout): PartsPlan | null {
  if (!previous) return rewritePlan(next, layout);
  const prev = previous.elements;
  let prevIndex: Map<unknown, number> | null = null;
  const changed: { key: string; text: string }[] = [];
  const inserted: InsertedRun[] = [];
  const removed: string[] = [];
  const newKeys = new Set<string>();
  let charsDelta = 0;
  let lastKey: string | null = null;
  let run: InsertedRun | null = null;
  const remove = (from: number, to: number) => {
    for (let r = from; r < to; r++) {
      removed.push(storedKey(prev, layout.key, r));
      charsDelta -= JSON.stringify(prev[r]).length;
    }
  };
  let i = 0;
  for (const value of next.elements) {
    if (i < prev.length && value === prev[i]) {
      // Kept as it was: the commonest case, decided without reading the element.
      if (run) run.before = storedKey(prev, layout.key, i);
      run = null;
      lastKey = storedKey(prev, layout.key, i++);
      continue;
    }
    const key = keyOf(value, layout);
    if (key === undefined) return null;
    let at = i < prev.length && storedKey(prev, layout.key, i) === key ? i : undefined;
    if (at === undefined) {
      prevIndex ??= keyIndex(prev, layout.key);
      at = prevIndex.get(key);
    }
    if (at === undefined) {
      if (newKeys.has(key)) return null;
      newKeys.add(key);
      const text = JSON.stringify(value);
      charsDelta += text.length;
      if (!run) inserted.push((run = { after: lastKey, before: null, parts: [] }));
      run.parts.push({ key, text });
      continue;
    }
    // Seen already (a duplicate, or an order the stored one cannot keep): everything again.
    if (at < i) return rewritePlan(next, layout);
    remove(i, at);
    if (run) run.before = key;
    run = null;
    lastKey = key;
    i = at + 1;
    const text = JSON.stringify(value);
    const oldText = JSON.stringify(prev[at]);
    if (text === oldText) continue;
    charsDelta += text.length - oldText.length;
    changed.push({ key, text });
  }
  remove(i, prev.length);
  return { kind: 'incremental', head: JSON.stringify(next.head), changed, inserted, removed, charsDelta, count: next.elements.length };
}

/**
 * Orders for a run of `n` new elements between two stored orders (null: that end is open), or null when
 * the numbers between them ran out. With one end open the run counts on from the other (by 1: it never runs
 * out), and callers take it as is. Between two orders a caller first asks `ordsBetweenWithRoom`, and moves
 * neighbours apart (`spreadOrds`) before the numbers run out: every part written again is its last resort.
 */
export function ordsBetween(lo: number | null, hi: number | null, n: number): number[] | null {
  const ords = Array.from({ length: n }, (_, i) => {
    if (lo === null && hi === null) return i;
    if (lo === null) return hi! - (n - i);
    if (hi === null) return lo + 1 + i;
    return lo + ((hi - lo) * (i + 1)) / (n + 1);
  });
  let prev = lo ?? -Infinity;
  for (const o of ords) {
    if (!Number.isFinite(o) || o <= prev) return null;
    prev = o;
  }
  return hi !== null && prev >= hi ? null : ords;
}

/**
 * How close two parts' orders may come, relative to the orders' size (a double keeps 52 bits): a new
 * part needs at least `INSERT_ROOM` on each side; a run that finds less moves its nearest neighbours
 * apart (`spreadOrds`).
 */
const INSERT_ROOM = 2 ** -40;

/** `ordsBetween` with at least `room` (relative to the orders' size) between any two, or null. */
function ordsWithRoom(lo: number | null, hi: number | null, n: number, room: number): number[] | null {
  const ords = ordsBetween(lo, hi, n);
  if (!ords) return null;
  const all = [lo ?? ords[0]!, ...ords, hi ?? ords.at(-1)!];
  const least = Math.max(Math.abs(all[0]!), Math.abs(all.at(-1)!), 1) * room;
  for (let i = 1; i < all.length; i++) if (all[i]! !== all[i - 1]! && all[i]! - all[i - 1]! < least) return null;
  return ords;
}

/**
 * Orders for a run of `n` new parts between two stored orders (`ordsBetween`), or null when they would
 * come too close for later runs: the caller then moves a few neighbours apart (`spreadOrds`).
 */
export function ordsBetweenWithRoom(lo: number, hi: number, n: number): number[] | null {
  return ordsWithRoom(lo, hi, n, INSERT_ROOM);
}

/**
 * New, evenly spaced orders for `n` places — a run and its `window` nearest neighbours on each side —
 * between the next neighbours' orders (null: that end of the document is open, always room), or null
 * when they would be too close: the caller then tries a wider window. A wider window must leave more
 * room (2^-28 for 4 neighbours, 4x per 4x neighbours, up to 2^-16): a spread of a crowded place then
 * reaches out to where the document is sparse, so the next runs there find room for a while (the
 * density thresholds of order-maintenance lists) instead of crowding the same few orders again.
 */
export function spreadOrds(lo: number | null, hi: number | null, n: number, window: number): number[] | null {
  return ordsWithRoom(lo, hi, n, Math.min(2 ** -30 * window, 2 ** -16));
}

/** The document's characters as JSON, from its head's text and its parts' (without reading them). */
export function assembledChars(headText: string, partsChars: number, count: number): number {
  return headText.length + partsChars + Math.max(count - 1, 0);
}

/** The document's JSON text: the head with `field` filled by the parts' texts (in order). */
export function assembleDocumentText(headText: string, field: string, parts: readonly string[]): string {
  const head = JSON.parse(headText) as Record<string, unknown>;
  const marked = JSON.stringify({ ...head, [field]: SENTINEL });
  const marker = JSON.stringify(SENTINEL);
  const at = marked.indexOf(marker);
  if (at !== -1 && marked.indexOf(marker, at + 1) === -1) return `${marked.slice(0, at)}[${parts.join(',')}]${marked.slice(at + marker.length)}`;
  // The head itself holds the marker's text: put it together the slow way.
  return JSON.stringify({ ...head, [field]: parts.map((p) => JSON.parse(p)) });
}
