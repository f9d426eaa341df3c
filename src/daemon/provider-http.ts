/**
 * The `fetch` the `openai` SDK is given for one endpoint: a request over `node:http`/`node:https` through
 * one keep-alive agent per endpoint, instead of the global fetch (undici: per open call a `Request`,
 * `Headers`, three `AbortController`s and web streams on top of its connection). A call waiting for the
 * model then holds a `ClientRequest` and its socket; the answer's web stream is made only once its
 * headers have come. Sockets are reused across calls (keep-alive) and bounded: at most `maxSockets` open
 * to the endpoint (the engine's max_in_flight, so no call waits for a socket), at most `maxFreeSockets`
 * kept idle, each closed after `idleMs` idle or sooner if the server's `Keep-Alive: timeout` says so.
 *
 * What fetch did and the SDK relies on is kept: the abort signal (a user's cancel, the call deadline)
 * destroys the request with an `AbortError`; connection errors carry their `code` (ECONNREFUSED …), which
 * the classifier reads; the body is a stream read by the provider with its size limit.
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import { Readable } from 'node:stream';

export interface PoolOptions {
  /** Connections open at once to the endpoint. */
  maxSockets: number;
  /** Idle connections kept for reuse. */
  maxFreeSockets: number;
  /** An idle connection is closed after this long. */
  idleMs: number;
}

/** Statuses whose `Response` must have no body. */
const NULL_BODY = new Set([204, 205, 304]);

export function pooledFetch(baseURL: string, pool: PoolOptions): (input: string | URL | Request, init?: RequestInit) => Promise<Response> {
  const secure = new URL(baseURL).protocol === 'https:';
  const agentOptions = { keepAlive: true, maxSockets: pool.maxSockets, maxFreeSockets: pool.maxFreeSockets, timeout: pool.idleMs, scheduling: 'lifo' as const };
  const agent = secure ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
  const request = secure ? https.request : http.request;
  return (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    if (input instanceof Request) throw new TypeError('pooledFetch takes a URL, not a Request');
    const body = init.body ?? null;
    if (body !== null && typeof body !== 'string' && !(body instanceof Uint8Array)) throw new TypeError('pooledFetch sends a string or bytes body only');
    // The headers are set on the request, not passed in its options: the agent keeps a socket's options
    // (in its listeners) for the socket's life, and they would keep every header of the call alive.
    const req = request(input, { method: init.method ?? 'GET', agent, ...(init.signal ? { signal: init.signal } : {}) });
    const answer = answerOf(req);
    try {
      setHeaders(req, init.headers);
      if (body !== null) req.setHeader('content-length', typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
      req.end(body ?? undefined);
    } catch (err) {
      // A header Node refuses: the request (already given a socket) is dropped, and the call fails with it.
      req.destroy(err as Error);
    }
    return answer;
  };
}

/**
 * The response of a sent request. Apart from `pooledFetch`'s scope, so that while the call waits its
 * listeners keep the request alone — not the SDK's `init` (its `Headers`, the body string).
 */
function answerOf(req: http.ClientRequest): Promise<Response> {
  return new Promise((resolve, reject) => {
    req.once('error', reject);
    req.once('response', (res) => {
      req.off('error', reject);
      resolve(toResponse(res));
    });
  });
}

/** The SDK hands a `Headers`; plain objects and pairs are taken too. */
function setHeaders(req: http.ClientRequest, init: RequestInit['headers']): void {
  if (!init) return;
  const headers = init instanceof Headers ? init : new Headers(init);
  headers.forEach((value, name) => {
    req.setHeader(name, value);
  });
}

function toResponse(res: IncomingMessage): Response {
  const status = res.statusCode ?? 0;
  const headers = new Headers();
  const raw = res.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!);
  if (NULL_BODY.has(status)) {
    res.resume();
    return new Response(null, { status, statusText: res.statusMessage ?? '', headers });
  }
  const body = Readable.toWeb(res) as ReadableStream<Uint8Array>;
  return new Response(body, { status, statusText: res.statusMessage ?? '', headers });
}
