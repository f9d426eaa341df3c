/**
 * The opt-in response cache (config `cache: true`, temperature 0 only). A request whose hash matches a
 * recorded valid answer gets that answer copied into a new `response` entry marked `cached_from`, with
 * no usage and no telemetry row: nothing was called, nothing was paid. Usage accounting skips entries
 * with `cached_from` (and `replay_of`); their `usage` is null.
 *
 * The index table is only a pointer: every hit is re-checked against the ledger entries it names, so a
 * stale or tampered index row can cause a miss but never a wrong answer.
 */
import { getLastLedgerEntryOfType, getLedgerEntry } from '../../ledger/store.js';
import { getCachedAnswer, rememberCachedAnswer } from '../../db/response-cache.js';
import type { LedgerRow, ThreadRow, WorkItemRow } from '../../db/schema.js';
import type { Sql } from '../../core/sql.js';
import { isCacheable, requestCacheKey } from '../../domain/cache-key.js';
import type { ChatRequest } from '../../domain/prompts.js';
import type { Tx } from './tx.js';
import { appendEntry, type PendingEntry } from './ledger-append.js';

interface RecordedPrompt {
  request: ChatRequest;
  endpoint: string;
}

/** The request's cache key on `endpoint` (`requestCacheKey`), or null when it may not be answered from the cache. */
export function cacheKeyOf(endpoint: string, request: ChatRequest): string | null {
  return isCacheable(request) ? requestCacheKey(endpoint, request) : null;
}

/** The recorded `response` entry that answers the request of this cache key (`cacheKeyOf`), or null. */
export async function findCachedAnswer(sql: Sql, key: string): Promise<LedgerRow | null> {
  const hit = await getCachedAnswer(sql, key);
  if (!hit) return null;
  const prompt = await getLedgerEntry(sql, hit.prompt_seq);
  const response = await getLedgerEntry(sql, hit.response_seq);
  if (prompt?.entry_type !== 'prompt' || response?.entry_type !== 'response' || prompt.work_item_id !== response.work_item_id) return null;
  const recorded = JSON.parse(prompt.payload) as RecordedPrompt;
  return requestCacheKey(recorded.endpoint, recorded.request) === key ? response : null;
}

/** Appends the cached answer as this attempt's response: same body, no usage, `cached_from` the original. */
export function appendCachedResponse(tx: Tx, thread: ThreadRow, item: WorkItemRow, source: LedgerRow): PendingEntry {
  const original = JSON.parse(source.payload) as { http_status: number; body: unknown };
  return appendEntry(tx, thread, item.id, 'response', item.attempt, {
    http_status: original.http_status,
    request_id: null,
    latency_ms: 0,
    usage: null,
    rate_limit: {},
    body: original.body,
    cached_from: source.seq,
  });
}

/** What a `response` entry's payload says about being a copy: served from the cache, or replayed. */
export interface RecordedCopy {
  cached_from?: number;
  replay_of?: number;
}

/**
 * The prompt a pipeline recorded and is sending: its ledger seq and the cache key of its request (null:
 * not cacheable), taken before the call so nothing done to the request object on the way can change it.
 */
export interface SentPrompt {
  seq: number;
  requestHash: string | null;
}

/**
 * Indexes a provider answer that just validated, under the request that produced it (the work item's
 * last prompt). Copies (cached, replayed) are not indexed: the index always names the paid original.
 * `sent`: that prompt as the pipeline that sent it has it, so it is not read back and parsed; without
 * it (a response recovered after a restart) it is read from the ledger. `recorded`: the response entry's
 * payload as the caller parsed it (parsing it again here showed in the engine's profile). A wrong index row
 * could only cause a miss: every hit is re-checked against the entries it names (`findCachedAnswer`).
 */
export async function rememberValidAnswer(tx: Tx, item: WorkItemRow, response: LedgerRow, recorded: RecordedCopy, sent?: SentPrompt): Promise<void> {
  if (recorded.cached_from !== undefined || recorded.replay_of !== undefined) return;
  const prompt = sent ?? (await lastPrompt(tx, item));
  if (!prompt || prompt.seq > response.seq || prompt.requestHash === null) return;
  await rememberCachedAnswer(tx.sql, {
    request_hash: prompt.requestHash,
    prompt_seq: prompt.seq,
    response_seq: response.seq,
    created_at: tx.now,
  });
}

async function lastPrompt(tx: Tx, item: WorkItemRow): Promise<SentPrompt | undefined> {
  const entry = await getLastLedgerEntryOfType(tx.sql, item.id, 'prompt');
  if (!entry) return undefined;
  const recorded = JSON.parse(entry.payload) as RecordedPrompt;
  return { seq: entry.seq, requestHash: cacheKeyOf(recorded.endpoint, recorded.request) };
}
