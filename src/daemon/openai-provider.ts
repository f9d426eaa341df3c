/**
 * The engine's provider port (engine/provider.ts) over the `openai` SDK: one HTTP call to any
 * OpenAI-compatible endpoint. The SDK's own retries are off (`maxRetries: 0`): the engine owns retries
 * so that every attempt is in the ledger. Errors are thrown as the SDK's types and classified at one boundary (engine/classify.ts).
 */
import OpenAI from 'openai';
import type { ProviderConfig } from './config/config.js';
import { AnswerTooLargeError, MissingApiKeyError } from '../core/errors.js';
import type { Provider } from './engine/provider.js';
import { pooledFetch } from './provider-http.js';

/** Idle keep-alive connections kept per endpoint, and for how long (under common servers' own 5 s). */
const IDLE_SOCKETS = 64;
const IDLE_MS = 4000;

/** Reads a body up to `limit` bytes; a longer one is abandoned (the connection is closed) without being buffered whole. */
async function readBodyLimited(response: Response, limit: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > limit) {
    await response.body?.cancel();
    throw new AnswerTooLargeError(limit, declared);
  }
  if (!response.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = response.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel();
      throw new AnswerTooLargeError(limit, null);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** `maxSockets`: connections open at once to the endpoint (the engine's max_in_flight: no call waits for one). */
export function createOpenAIProvider(cfg: ProviderConfig, maxSockets: number): Provider {
  // Local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) need no key; api.openai.com does.
  const needsKey = /(^|\.)openai\.com$/.test(new URL(cfg.baseURL).hostname);
  const client = new OpenAI({
    apiKey: cfg.apiKey ?? 'no-key',
    baseURL: cfg.baseURL,
    maxRetries: 0,
    timeout: cfg.callTimeoutMs,
    fetch: pooledFetch(cfg.baseURL, { maxSockets, maxFreeSockets: Math.min(IDLE_SOCKETS, maxSockets), idleMs: IDLE_MS }),
  });
  return {
    endpoint: cfg.baseURL,
    async send(request, signal, timeoutMs, headers) {
      if (needsKey && !cfg.apiKey) throw new MissingApiKeyError();
      const response = await client.chat.completions
        .create(request as unknown as OpenAI.ChatCompletionCreateParamsNonStreaming, { signal, timeout: timeoutMs, headers })
        .asResponse();
      const rateLimit: Record<string, string> = {};
      response.headers.forEach((value, name) => {
        if (name.startsWith('x-ratelimit-')) rateLimit[name] = value;
      });
      return {
        httpStatus: response.status,
        bodyText: await readBodyLimited(response, cfg.maxAnswerBytes),
        requestId: response.headers.get('x-request-id'),
        rateLimit,
      };
    },
  };
}
