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
 */
import type { Sql } from '../core/sql.js';
import { getDocumentContent, getDocumentHead, type DocumentHead } from './projects.js';

type Parse<T> = (content: string) => T;

interface Entry {
  version: number;
  parse: Parse<unknown>;
  value: unknown;
}

/** One cache per connection (`Sql.connection`: a write closure's handle shares its writer's), or per group of them. */
const caches = new WeakMap<object, Map<string, Entry>>();
/** Connections that share one cache: the member → the group (`shareDocumentCache`). */
const groups = new WeakMap<object, object>();

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
 * forgets the whole group's cache, before its ROLLBACK is sent, and until then the rolled-back version
 * was visible to no other connection (READ COMMITTED), so no other member can have read it.
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
 * no version, with one await on a cache hit (the engine reads a few documents for every item).
 */
export async function readDocumentValue<T>(sql: Sql, projectId: string, docType: string, parse: Parse<T>, key = ''): Promise<T | null> {
  const head = await getDocumentHead(sql, projectId, docType, key);
  if (!head) return null;
  return documentValueAt(sql, head, parse);
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
  const hit = cacheOf(sql).get(head.id);
  return hit && hit.version === head.version && hit.parse === parse ? (hit.value as T) : MISS;
}

/** Reads, parses and caches the current content of document `id`. */
async function loadParsed<T>(sql: Sql, id: string, parse: Parse<T>): Promise<ParsedDocument<T> | undefined> {
  const row = await getDocumentContent(sql, id);
  if (row === undefined) return undefined;
  const { content, ...current } = row;
  const value = parse(content);
  cacheOf(sql).set(current.id, { version: current.version, parse, value });
  return { ...current, value };
}

/**
 * Records the value just written as `version` of document `id`, so the next read needs no parse.
 * `value` must be what `parse` would return for the stored content.
 */
export function rememberDocument<T>(sql: Sql, id: string, version: number, parse: Parse<T>, value: T): void {
  cacheOf(sql).set(id, { version, parse, value });
}

/** Drops every cached document of this connection, or of its group (after a rollback). */
export function forgetDocuments(sql: Pick<Sql, 'connection'>): void {
  caches.get(groups.get(sql.connection) ?? sql.connection)?.clear();
}
