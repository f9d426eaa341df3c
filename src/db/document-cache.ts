/**
 * Parsed documents, kept between reads. Every item of a run reads its project's epic architecture and
 * story backlog; parsing and validating those JSON documents again each time was the largest cost per
 * item. A document's version changes with every write, so an entry is valid exactly while the stored
 * version equals the cached one: a read costs one indexed lookup of (id, version) on a hit.
 *
 * One rule keeps this sound: a version number can come back with other content only if a write was
 * rolled back, so the writer calls `forgetDocuments` after every rollback (WriterOptions.onRollback).
 * Other daemons sharing a Postgres database only ever add versions this cache has not seen, so they
 * need no rule of their own. Cached values are shared: callers must not mutate them.
 *
 * A version and its content are read in one statement: read in two, a write committed in between (the
 * reader of a pool may run them on two connections) would file the newer content under the older version.
 *
 * A miss on a document stored in parts, with an older version cached (on a shared Postgres: another
 * daemon wrote it), costs what changed when `parse` has `parts`: the parts written after the cached
 * version are read and parsed, the others taken from the cached value by key (readStoredDocument). Sound
 * by the same rule: the cached value is exactly its version's content, and a part not written since
 * then has that version's text.
 */
import type { Sql } from '../core/sql.js';
import { assembleDocumentText } from '../domain/document-parts.js';
import { headUpdateQueued } from './document-parts-queued.js';
import { readStoredDocument, type StoredDocument } from './document-parts.js';
import { getDocumentHead, type DocumentHead } from './projects.js';
import { keepReadInTransaction, readInTransaction, readMark } from './transaction-reads.js';

/**
 * How a parse puts a document stored in parts together from its parts, each parsed once: `assemble`'s
 * value must equal what the parse returns for the whole text (the head with `elements` at `field`).
 */
interface PartsParse<T> {
  element: (text: string) => unknown;
  assemble: (head: string, field: string, elements: unknown[]) => T;
}

type Parse<T> = ((content: string) => T) & { parts?: PartsParse<T> };

interface Entry {
  version: number;
  parse: Parse<unknown>;
  value: unknown;
}

/** One cache per connection (`Sql.connection`: a write closure's handle shares its writer's), or per group of them. */
const caches = new WeakMap<object, Map<string, Entry>>();
/** How many times each cache was forgotten (`forgetDocuments`): a read that saw the count change may hold a rolled-back value. */
const forgets = new WeakMap<Map<string, Entry>, number>();
/** Connections that share one cache: the member → the group (`shareDocumentCache`). */
const groups = new WeakMap<object, object>();
/**
 * The values a transaction wrote of documents whose next version is queued for its COMMIT
 * (document-parts-queued.ts `headUpdateQueued`), by its statement handle: the only place that version's value is
 * until then (its row is a version behind, and a read of it is refused), so kept apart from the shared
 * cache, whose entry another connection's read may replace and any rollback in the daemon forgets. A
 * closure run again starts on a new handle: nothing of a rolled-back run is kept.
 */
const ownWrites = new WeakMap<Sql, Map<string, Entry>>();

function cacheOf(sql: Pick<Sql, 'connection'>): Map<string, Entry> {
  const key = groups.get(sql.connection) ?? sql.connection;
  let cache = caches.get(key);
  if (!cache) {
    cache = new Map();
    caches.set(key, cache);
  }
  return cache;
}

/**
 * Makes `connection` use `group`'s cache. For a daemon's Postgres pools: each write takes whichever
 * pooled connection is free, so a cache per connection missed most reads (the version an item's write
 * remembered was on another connection when the next item read it: a whole document read and parsed
 * again, ~80 % of the engine's reads). Sharing stays sound under the rule above: a rollback on any member
 * forgets the whole group's cache, before its ROLLBACK is sent. Until then the version a write remembered
 * is in the group's cache but not in the database for the other members (READ COMMITTED): their reads
 * see the committed version, never hit the newer entry, and never splice onto it (`loadParsed`).
 */
export function shareDocumentCache(connection: object, group: object): void {
  groups.set(connection, group);
}

export interface ParsedDocument<T> extends DocumentHead {
  value: T;
}

/** The project's document of `docType` (and `key`), parsed by `parse` (once per version), or undefined if absent. */
export async function readParsedDocument<T>(sql: Sql, projectId: string, docType: string, parse: Parse<T>, key = ''): Promise<ParsedDocument<T> | undefined> {
  const head = await getDocumentHead(sql, projectId, docType, key);
  if (!head) return undefined;
  const hit = cachedValue(sql, head, parse);
  if (hit !== MISS) return { ...head, value: hit };
  return await loadParsed(sql, head.id, parse);
}

/**
 * Only the parsed value (null when the document is absent): `readParsedDocument` for a reader that needs
 * no version, with one await on a cache hit (the engine reads a few documents for every item). In a
 * Postgres write transaction that already read it, no read at all (db/transaction-reads.ts).
 */
export async function readDocumentValue<T>(sql: Sql, projectId: string, docType: string, parse: Parse<T>, key = ''): Promise<T | null> {
  const read = readInTransaction(sql, projectId, docType, key, parse);
  if (read) return read.value as T | null;
  const mark = readMark(sql);
  const head = await getDocumentHead(sql, projectId, docType, key);
  const at = head ? documentValueAt(sql, head, parse) : null;
  const value = at instanceof Promise ? await at : at;
  keepReadInTransaction(sql, mark, { projectId, docType, key }, { id: head?.id ?? null, parse, value });
  return value;
}

/**
 * The parsed value of the document whose head the caller just read in this transaction (null when that
 * read found none): no second read of the head. Not async: a cache hit is the usual case.
 */
export function documentValueAt<T>(sql: Sql, head: DocumentHead | undefined, parse: Parse<T>): T | null | Promise<T | null> {
  if (!head) return null;
  const hit = cachedValue(sql, head, parse);
  if (hit !== MISS) return hit;
  return loadParsed(sql, head.id, parse).then((doc) => doc?.value ?? null);
}

const MISS = Symbol('miss');

/** The cached value of this version of the document, or MISS. */
function cachedValue<T>(sql: Sql, head: DocumentHead, parse: Parse<T>): T | typeof MISS {
  const own = ownWrites.get(sql)?.get(head.id);
  if (own && own.version === head.version && own.parse === parse) return own.value as T;
  const hit = cacheOf(sql).get(head.id);
  return hit && hit.version === head.version && hit.parse === parse ? (hit.value as T) : MISS;
}

/**
 * Reads, parses and caches the current content of document `id`: only the parts written since the
 * cached version when there is one to splice into (see the header), else whole. Spliced only onto an
 * entry older than the stored version and not forgotten meanwhile: an entry as new as the stored one or
 * newer is this daemon's own write not committed yet (`rememberDocument` runs before the COMMIT, and a
 * shared cache shows it to the daemon's other connections), and an entry forgotten while the read was
 * in flight may be a rolled-back version; either would put uncommitted content under a committed version.
 */
async function loadParsed<T>(sql: Sql, id: string, parse: Parse<T>): Promise<ParsedDocument<T> | undefined> {
  const cache = cacheOf(sql);
  const forgotten = forgets.get(cache) ?? 0;
  const held = cache.get(id);
  const from = held && held.parse === parse && parse.parts ? held : undefined;
  const changed = await readStoredDocument(sql, id, from?.version ?? -1);
  if (changed === undefined) return undefined;
  const base = from && from.version < changed.version && (forgets.get(cache) ?? 0) === forgotten ? from : undefined;
  // No base: `changed` is whole when it was read without one. A part the base lacks (it was not stored in
  // parts by this key): read again whole.
  const spliced = from && !base ? MISS : parsedValue(changed, parse, base?.value);
  const stored = spliced === MISS ? await readStoredDocument(sql, id) : changed;
  if (stored === undefined) return undefined;
  const value = spliced === MISS ? (parsedValue(stored, parse, undefined) as T) : spliced;
  cache.set(id, { version: stored.version, parse, value });
  return { id, version: stored.version, updated_at: stored.updated_at, value };
}

/** `stored`'s value; a part without its text is `held`'s element of that key (MISS when it has none). */
function parsedValue<T>(stored: StoredDocument, parse: Parse<T>, held: unknown): T | typeof MISS {
  const { layout, head, parts } = stored;
  if (layout === null) return parse(head);
  if (!parse.parts)
    return parse(
      assembleDocumentText(
        head,
        layout.field,
        parts.map((p) => p.text!),
      ),
    );
  let byKey: Map<unknown, unknown> | undefined;
  const elements: unknown[] = [];
  for (const p of parts) {
    if (p.text !== null) {
      elements.push(parse.parts.element(p.text));
      continue;
    }
    byKey ??= elementsByKey(held, layout.field, layout.key);
    const element = byKey.get(p.key);
    if (element === undefined) return MISS;
    elements.push(element);
  }
  return parse.parts.assemble(head, layout.field, elements);
}

/** The elements of `value[field]` by their `key` field (empty when `value` has no array there). */
function elementsByKey(value: unknown, field: string, key: string): Map<unknown, unknown> {
  const elements = (value as Record<string, unknown> | null)?.[field];
  if (!Array.isArray(elements)) return new Map();
  return new Map(elements.map((e: unknown) => [(e as Record<string, unknown> | null)?.[key], e]));
}

/**
 * Records the value just written as `version` of document `id`, so the next read needs no parse.
 * `value` must be what `parse` would return for the stored content. Its version queued for the COMMIT,
 * also for this handle alone (`ownWrites`).
 */
export function rememberDocument<T>(sql: Sql, id: string, version: number, parse: Parse<T>, value: T): void {
  const entry = { version, parse, value };
  cacheOf(sql).set(id, entry);
  if (!headUpdateQueued(sql, id)) return;
  let own = ownWrites.get(sql);
  if (!own) ownWrites.set(sql, (own = new Map()));
  own.set(id, entry);
}

/** Drops every cached document of this connection, or of its group (after a rollback). */
export function forgetDocuments(sql: Pick<Sql, 'connection'>): void {
  const cache = caches.get(groups.get(sql.connection) ?? sql.connection);
  if (!cache) return;
  cache.clear();
  forgets.set(cache, (forgets.get(cache) ?? 0) + 1);
}
