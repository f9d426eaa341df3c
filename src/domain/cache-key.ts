/**
 * The response cache's key: what makes two calls the same call. It covers the endpoint (the same model
 * name at two providers is two models) and the whole rendered request — model, messages, response
 * format, temperature, max_tokens — in canonical JSON, so key order or whitespace never matters.
 */
import { createHash } from 'node:crypto';
import type { ChatRequest } from './prompts.js';
import { canonicalJson } from './canonical-json.js';

/** Only deterministic calls may be answered from the cache. */
export function isCacheable(request: ChatRequest): boolean {
  return request.temperature === 0;
}

/** sha256 hex of the canonical {endpoint, request}. */
export function requestCacheKey(endpoint: string, request: unknown): string {
  return createHash('sha256').update(canonicalJson({ endpoint, request })).digest('hex');
}
