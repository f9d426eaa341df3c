/**
 * The engine's provider port (engine/provider.ts) for any OpenAI-compatible endpoint: one
 * `POST {baseURL}/chat/completions` over the endpoint's pooled keep-alive connections (provider-http.ts).
 * The `openai` SDK's request pipeline is not used — per open call it kept its options, `Headers`, fetch
 * init, timeout controller and promise frames alive while the model thinks — but its error types are:
 * a failure is thrown exactly as the SDK (with `maxRetries: 0`) would throw it — `APIError.generate` for
 * a non-2xx answer, `APIConnectionError` / `APIConnectionTimeoutError` / `APIUserAbortError` before one —
 * and classified at one boundary (engine/classify.ts). No retries here: the engine owns them, so that
 * every attempt is in the ledger.
 */
import type { IncomingMessage } from 'node:http';
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai/error';
import type { ProviderConfig } from './config/config.js';
import { AnswerTooLargeError, MissingApiKeyError } from '../core/errors.js';
import { VERSION } from '../core/version.js';
import type { Provider, RawResponse } from './engine/provider.js';
import { pooledPost, readBodyLimited } from './provider-http.js';

/** Idle keep-alive connections kept per endpoint, and for how long (under common servers' own 5 s). */
const IDLE_SOCKETS = 64;
const IDLE_MS = 4000;

/** `maxSockets`: connections open at once to the endpoint (the engine's max_in_flight: no call waits for one). */
export function createOpenAIProvider(cfg: ProviderConfig, maxSockets: number): Provider {
  // Local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) need no key; api.openai.com does.
  const needsKey = /(^|\.)openai\.com$/.test(new URL(cfg.baseURL).hostname);
  const path = `${new URL(cfg.baseURL).pathname.replace(/\/+$/, '')}/chat/completions`;
  const post = pooledPost(cfg.baseURL, { maxSockets, maxFreeSockets: Math.min(IDLE_SOCKETS, maxSockets), idleMs: IDLE_MS });
  const fixedHeaders = {
    accept: 'application/json',
    'content-type': 'application/json',
    'user-agent': `combine/${VERSION}`,
    authorization: `Bearer ${cfg.apiKey ?? 'no-key'}`,
  };
  return {
    endpoint: cfg.baseURL,
    // Not async: the request is serialized and written before this returns, so nothing of it (nor of
    // the prompt) is kept while the call waits; only `receive` is suspended, on the answer.
    send(request, signal, headers) {
      if (needsKey && !cfg.apiKey) return Promise.reject(new MissingApiKeyError());
      if (signal.aborted) return Promise.reject(abortedError(signal));
      return post(path, JSON.stringify(request), { ...fixedHeaders, ...headers }, signal).then(
        // A deadline or a cancel that lands while the body is read fails the same as before the headers
        // (Node's own error there is a bare "aborted"); an answer's status or size error stays itself.
        (res) =>
          receive(res, cfg.maxAnswerBytes).catch((err: unknown) => {
            throw signal.aborted && !(err instanceof APIError || err instanceof AnswerTooLargeError) ? abortedError(signal) : err;
          }),
        (err: unknown) => {
          throw connectionError(err, signal);
        },
      );
    },
  };
}

/** The answer: a 2xx one read up to `limit` bytes, any other thrown as the SDK's error for its status. */
async function receive(res: IncomingMessage, limit: number): Promise<RawResponse> {
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) throw await statusError(res, status, limit);
  return answerOf(res, status, await readBodyLimited(res, limit));
}

/** A 2xx answer: its body and the headers the limiter and the ledger keep. */
function answerOf(res: IncomingMessage, httpStatus: number, bodyText: string): RawResponse {
  const rateLimit: Record<string, string> = {};
  for (const name in res.headers) {
    const value = res.headers[name];
    if (name.startsWith('x-ratelimit-') && typeof value === 'string') rateLimit[name] = value;
  }
  const requestId = res.headers['x-request-id'];
  return { httpStatus, bodyText, requestId: typeof requestId === 'string' ? requestId : null, rateLimit };
}

/** What the SDK throws when no answer came: an abort (the user's or the deadline's), a timeout, or the connection's own error as the cause. */
function connectionError(err: unknown, signal: AbortSignal): APIError {
  if (signal.aborted) return abortedError(signal);
  if (/timed? ?out/i.test(String(err))) return new APIConnectionTimeoutError();
  return new APIConnectionError({ cause: err instanceof Error ? err : new Error(String(err)) });
}

/**
 * An aborted call as the SDK fails it: the deadline's abort (a `TimeoutError`, as `AbortSignal.timeout`
 * and the engine's deadline give) as its own timeout, any other as the user's abort.
 */
function abortedError(signal: AbortSignal): APIError {
  return (signal.reason as { name?: unknown } | undefined)?.name === 'TimeoutError' ? new APIConnectionTimeoutError() : new APIUserAbortError();
}

/** A non-2xx answer as the SDK's own error (RateLimitError, BadRequestError …), its JSON body parsed as the SDK does. */
async function statusError(res: IncomingMessage, status: number, limit: number): Promise<APIError> {
  const text = await readBodyLimited(res, limit).catch((err: Error) => err.message);
  let json: object | undefined;
  try {
    json = JSON.parse(text) as object;
  } catch {
    json = undefined;
  }
  return APIError.generate(status, json, json ? undefined : text, headersOf(res));
}

function headersOf(res: IncomingMessage): Headers {
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  return headers;
}
