/**
 * The daemon's HTTP server: the JSON API and the dashboard on one port of 127.0.0.1, off unless asked
 * for (`--http-port`, config `http.port`, `combine ui`). Every request passes the guard (security.ts)
 * before anything else; a browser asking for HTML gets the dashboard's page for the same path, any
 * other client the JSON API (routes in api.ts, documented at /openapi.json).
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { Services } from '../services/index.js';
import { apiRoutes } from './api.js';
import { openApiDocument } from './openapi.js';
import { toProblem, type Problem } from './problem.js';
import { compilePath, parseWith, queryObject, readJsonBody, refuseNulInUrl, type Route } from './routes.js';
import { noBody } from './schemas.js';
import { parseTraceparent } from '../../core/trace-context.js';
import { ensureHttpToken, RequestGuard } from './security.js';
import { DEFAULT_SERVER_LIMITS, limitConnections, serverOptions } from '../runtime/server-limits.js';
import { HttpProblem } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';

/** The dashboard as the server sees it (src/web): pages by path, static assets, error pages. */
export interface Dashboard {
  /** The page for a GET of `path`, or null when there is none (the JSON API answers instead). */
  page(path: string, query: URLSearchParams, services: Services): string | null | Promise<string | null>;
  errorPage(problem: Problem): string;
  asset(path: string): { type: string; body: Buffer } | null;
}

export interface HttpServerOptions {
  services: Services;
  home: string;
  /** 0: any free port (tests). */
  port: number;
  logger: Logger;
  dashboard: Dashboard | null;
}

export interface HttpServer {
  port: number;
  /** The dashboard's address, without the token. */
  url: string;
  close(): Promise<void>;
}

const COMMON_HEADERS = {
  'cache-control': 'no-store',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  vary: 'Accept, Cookie, Authorization',
};
const HTML_HEADERS = {
  ...COMMON_HEADERS,
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
};

/** The operations this daemon loaded (fixed until it restarts, so the document is made once). */
const operationDocs = (services: Services) =>
  services.threads
    .operations()
    .map((s) => ({ name: s.name, description: s.description, input: services.threads.operation(s.name).input as Record<string, unknown> }));

const compiled = apiRoutes.map((r) => ({ route: r, match: compilePath(r.path) }));

function findRoute(method: string, path: string): { route: Route; params: Record<string, string> } {
  const allowed: string[] = [];
  for (const c of compiled) {
    const params = c.match(path);
    if (!params) continue;
    if (c.route.method === method) return { route: c.route, params };
    allowed.push(c.route.method);
  }
  if (allowed.length > 0)
    throw new HttpProblem(405, 'METHOD_NOT_ALLOWED', `${method} is not allowed on ${path} (use ${allowed.join(', ')})`, undefined, {
      allow: allowed.join(', '),
    });
  throw new HttpProblem(404, 'NOT_FOUND', `no endpoint ${method} ${path} (see /openapi.json)`);
}

/** A browser navigating (or the dashboard's own polling) asks for text/html; API clients do not. */
function wantsHtml(req: IncomingMessage): boolean {
  return /\btext\/html\b/.test(req.headers.accept ?? '');
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res
    .writeHead(status, { ...COMMON_HEADERS, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(text), ...headers })
    .end(text);
}

async function callRoute(
  services: Services,
  req: IncomingMessage,
  method: string,
  url: URL,
): Promise<{ status: number; body: unknown; headers: Record<string, string> }> {
  const { route: r, params } = findRoute(method, url.pathname);
  const query = queryObject(url.searchParams);
  const raw = method === 'POST' ? await readJsonBody(req) : undefined;
  const input = {
    services,
    params: r.params ? parseWith('path', r.params, params) : {},
    query: parseWith('query', r.query ?? noBody, query),
    body: parseWith('body', r.body ?? noBody, raw ?? {}),
    // Per W3C Trace Context, an invalid header is ignored (the command starts a new trace).
    traceparent: typeof req.headers.traceparent === 'string' && parseTraceparent(req.headers.traceparent) ? req.headers.traceparent : null,
  };
  const result = await r.handle(input);
  const status = r.otherStatus?.when(result) ? r.otherStatus.status : r.status;
  return { status, body: result, headers: r.headers?.(result, input) ?? {} };
}

export async function startHttpServer(o: HttpServerOptions): Promise<HttpServer> {
  const token = ensureHttpToken(o.home);
  let guard: RequestGuard | null = null;
  let openapi: unknown = null;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method === 'HEAD' ? 'GET' : (req.method ?? 'GET');
    const html = method === 'GET' && wantsHtml(req) && o.dashboard !== null;
    try {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      guard!.checkSite(req);
      if (method === 'GET' && url.pathname.startsWith('/assets/')) {
        const asset = o.dashboard?.asset(url.pathname.slice('/assets/'.length));
        if (!asset) throw new HttpProblem(404, 'NOT_FOUND', `no asset ${url.pathname}`);
        res.writeHead(200, { ...COMMON_HEADERS, 'cache-control': 'no-cache', 'content-type': asset.type, 'content-length': asset.body.length }).end(asset.body);
        return;
      }
      const urlToken = url.searchParams.get('token');
      if (html && urlToken !== null) {
        // The URL `combine ui` prints: trade the token for the cookie, and drop it from the address bar.
        if (!guard!.acceptsUrlToken(urlToken)) throw new HttpProblem(401, 'UNAUTHORIZED', 'this link carries a wrong token: open the one `combine ui` prints');
        url.searchParams.delete('token');
        res.writeHead(303, { ...COMMON_HEADERS, location: `${url.pathname}${url.search}`, 'set-cookie': guard!.sessionCookie() }).end();
        return;
      }
      if (!guard!.isAuthenticated(req)) {
        throw new HttpProblem(
          401,
          'UNAUTHORIZED',
          'a token is needed: send `Authorization: Bearer <COMBINE_HOME/http.token>`, or open the URL `combine ui` prints',
          undefined,
          {
            'www-authenticate': 'Bearer realm="combine"',
          },
        );
      }
      refuseNulInUrl(url);
      if (method === 'GET' && url.pathname === '/openapi.json') return sendJson(res, 200, (openapi ??= openApiDocument(apiRoutes, operationDocs(o.services))));
      if (html) {
        const page = await o.dashboard!.page(url.pathname, url.searchParams, o.services);
        if (page !== null) {
          res.writeHead(200, HTML_HEADERS).end(page);
          return;
        }
      }
      const r = await callRoute(o.services, req, method, url);
      sendJson(res, r.status, r.body, r.headers);
    } catch (err) {
      const { problem, headers } = toProblem(err, (e) =>
        o.logger.error({ err: e, component: 'http', method, path: (req.url ?? '').split('?')[0] }, 'HTTP request failed'),
      );
      // A body cut short at the size limit is still arriving: close rather than read it.
      const close: Record<string, string> = problem.status === 413 ? { connection: 'close' } : {};
      if (html) res.writeHead(problem.status, { ...HTML_HEADERS, ...headers, ...close }).end(o.dashboard!.errorPage(problem));
      else sendJson(res, problem.status, problem, { 'content-type': 'application/problem+json', ...headers, ...close });
    }
  }

  // The same timeouts and connection cap as the API socket: a silent or slow client cannot hold the port.
  const server = http.createServer(serverOptions(DEFAULT_SERVER_LIMITS), (req, res) => void handle(req, res));
  limitConnections(server, DEFAULT_SERVER_LIMITS);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : o.port;
  guard = new RequestGuard(token, port);
  return {
    port,
    url: `http://127.0.0.1:${port}/`,
    async close() {
      server.closeIdleConnections();
      const force = setTimeout(() => server.closeAllConnections(), 1000);
      await new Promise<void>((resolve) => server.close(() => resolve()));
      clearTimeout(force);
    },
  };
}
