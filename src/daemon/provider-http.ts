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
 * that breaks while the answer is read fails the read with ECONNRESET. No timer of its own: the caller's
 * signal carries the call's deadline.
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

/** Sends `body` as a POST to `path` on the endpoint and resolves with the answer once its headers have come. */
export type PostJson = (path: string, body: string, headers: Record<string, string>, signal: AbortSignal) => Promise<IncomingMessage>;

export function pooledPost(baseURL: string, pool: PoolOptions): PostJson {
  const base = new URL(baseURL);
  const secure = base.protocol === 'https:';
  const agentOptions = { keepAlive: true, maxSockets: pool.maxSockets, maxFreeSockets: pool.maxFreeSockets, timeout: pool.idleMs, scheduling: 'lifo' as const };
  const agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  const request = secure ? https.request : http.request;
  // Parsed once: a URL string given to each request would be parsed into a URL and its parts per call.
  const host = base.host;
  const target = { protocol: base.protocol, hostname: base.hostname.replace(/^\[|\]$/g, ''), port: base.port || (secure ? 443 : 80) };
  return (path, body, headers, signal) => {
    // The headers as one flat list, written as they are: given by name (setHeader), Node would also keep
    // them in a per-request dictionary while the call waits. `Host` is then ours to send.
    const list = ['host', host, 'content-length', String(Buffer.byteLength(body))];
    for (const name in headers) list.push(name, headers[name]!);
    let req: http.ClientRequest;
    try {
      req = request({ ...target, path, method: 'POST', agent, headers: list });
    } catch (err) {
      // A header Node refuses (an invalid character): nothing was sent.
      return Promise.reject(err);
    }
    const answer = answerOf(req, signal);
    req.end(body);
    return answer;
  };
}

/**
 * The answer of a sent request. Apart from `pooledPost`'s scope, so that while the call waits its
 * listeners keep the request alone — not the body string or the headers. The abort signal is listened
 * to here (one listener), not given to `http.request` (which ties it to the request's end with a
 * stream `finished` and its half-dozen closures per call).
 */
function answerOf(req: http.ClientRequest, signal: AbortSignal): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const abort = () => req.destroy(abortError());
    req.once('error', (err) => {
      signal.removeEventListener('abort', abort);
      reject(err);
    });
    req.once('response', (res) => {
      // Still listened to while the body is read: an abort then breaks the answer, as it would the request.
      res.once('close', () => signal.removeEventListener('abort', abort));
      resolve(res);
    });
    if (signal.aborted) abort();
    else signal.addEventListener('abort', abort, { once: true });
  });
}

function abortError(): Error {
  return Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' });
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
