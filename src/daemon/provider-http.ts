/**
 * The provider's HTTP path: one JSON POST over `node:http`/`node:https` through one keep-alive agent per
 * endpoint. It is what the daemon sends a chat request with — not the `openai` SDK's per-call pipeline
 * (its request options, `Headers`, init object, timeout controller and promise frames, kept alive while
 * the model thinks) nor undici's fetch (a `Request`, three `AbortController`s and web streams per call).
 * A call waiting for the model holds a `ClientRequest`, its socket and this module's listeners.
 *
 * Sockets are reused across calls (keep-alive) and bounded: at most `maxSockets` open to the endpoint
 * (the engine's max_in_flight, so no call waits for a socket), at most `maxFreeSockets` kept idle, each
 * closed after `idleMs` idle or sooner if the server's `Keep-Alive: timeout` says so.
 *
 * Failures are Node's own (the caller maps them to the SDK's error types): the abort signal destroys the
 * request with an `AbortError`; connection errors carry their `code` (ECONNREFUSED …); a connection
 * that breaks while the answer is read fails the read with ECONNRESET.
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { AnswerTooLargeError } from '../core/errors.js';

export interface PoolOptions {
  /** Connections open at once to the endpoint. */
  maxSockets: number;
  /** Idle connections kept for reuse. */
  maxFreeSockets: number;
  /** An idle connection is closed after this long. */
  idleMs: number;
}

/** Sends `body` as a POST to `url` and resolves with the answer once its headers have come. */
export type PostJson = (url: string, body: string, headers: Record<string, string>, signal: AbortSignal, headersTimeoutMs: number) => Promise<IncomingMessage>;

/** The error a request fails with when no answer's headers came within its `headersTimeoutMs`. */
export class HeadersTimeoutError extends Error {
  override name = 'HeadersTimeoutError';
}

export function pooledPost(baseURL: string, pool: PoolOptions): PostJson {
  const secure = new URL(baseURL).protocol === 'https:';
  const agentOptions = { keepAlive: true, maxSockets: pool.maxSockets, maxFreeSockets: pool.maxFreeSockets, timeout: pool.idleMs, scheduling: 'lifo' as const };
  const agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  const request = secure ? https.request : http.request;
  return (url, body, headers, signal, headersTimeoutMs) => {
    // The headers are set on the request, not passed in its options: the agent keeps a socket's options
    // (in its listeners) for the socket's life, and they would keep every header of the call alive.
    const req = request(url, { method: 'POST', agent, signal });
    const answer = answerOf(req, headersTimeoutMs);
    try {
      for (const name in headers) req.setHeader(name, headers[name]!);
      req.setHeader('content-length', Buffer.byteLength(body));
      req.end(body);
    } catch (err) {
      // A header Node refuses: the request (already given a socket) is dropped, and the call fails with it.
      req.destroy(err as Error);
    }
    return answer;
  };
}

/**
 * The answer of a sent request. Apart from `pooledPost`'s scope, so that while the call waits its
 * listeners keep the request alone — not the body string or the headers.
 */
function answerOf(req: http.ClientRequest, headersTimeoutMs: number): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => req.destroy(new HeadersTimeoutError(`no answer within ${headersTimeoutMs} ms`)), headersTimeoutMs);
    req.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.once('response', (res) => {
      clearTimeout(timer);
      resolve(res);
    });
  });
}

/**
 * Reads an answer's body up to `limit` bytes. A longer one is abandoned (its connection closed) without
 * being buffered whole: at once when its `content-length` says so, else once the limit is passed.
 */
export function readBodyLimited(res: IncomingMessage, limit: number): Promise<string> {
  const declared = Number(res.headers['content-length'] ?? Number.NaN);
  if (declared > limit) {
    res.destroy();
    return Promise.reject(new AnswerTooLargeError(limit, declared));
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > limit) {
        res.destroy();
        reject(new AnswerTooLargeError(limit, null));
        return;
      }
      chunks.push(chunk);
    });
    res.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    // A connection that breaks in the middle: Node fails the answer with "aborted" (ECONNRESET).
    res.once('error', reject);
    res.once('close', () => {
      if (!res.complete) reject(Object.assign(new Error('the answer was cut off'), { code: 'ECONNRESET' }));
    });
  });
}
